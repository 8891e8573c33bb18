//! What each client of a stack needs from the adapter and the access layer, checked before
//! anything runs (docs/design.md §9: a client the stack cannot honour is refused with the key named,
//! never silently degraded).
//!
//! The figures come from the same functions the clients size themselves with
//! ([`DiskConfig::dma_bytes`] and friends), so the check and the run cannot disagree.

use std::string::String;

use hcabus::verbs::VerbsLimits;

use ibal::access::IbalConfig;
use ibal::disk::DiskConfig;
use ibal::ipoib::IpoibConfig;
use ibal::uverbs;

/// One client's share of the adapter at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// Access-layer consumers (`Ibal::open`).
    pub consumers: u32,
    pub pds: u32,
    pub cqs: u32,
    pub qps: u32,
    pub mrs: u32,
    pub ahs: u32,
    /// DMA-able host memory, each reservation rounded up as `dma_alloc` aligns it.
    pub dma_bytes: u64,
    /// The largest single completion queue.
    pub cq_entries: u32,
    /// The largest single work queue.
    pub wr: u32,
}

/// `dma_alloc` starts every reservation on a 64-byte boundary.
const DMA_ALIGN: u64 = 64;

fn aligned(len: u64) -> u64 {
    len.next_multiple_of(DMA_ALIGN)
}

/// One consumer with one connection: a PD, a CQ, a QP and an MR, and `ahs` address handles.
fn one_connection(ahs: u32, dma_bytes: u64, cq_entries: u32, wr: u32) -> Needs {
    Needs {
        consumers: 1,
        pds: 1,
        cqs: 1,
        qps: 1,
        mrs: 1,
        ahs,
        dma_bytes: aligned(dma_bytes),
        cq_entries,
        wr,
    }
}

pub(crate) fn disk(c: &DiskConfig) -> Needs {
    one_connection(0, c.dma_bytes(), c.cq_entries(), u32::from(c.queue_depth))
}

pub(crate) fn ipoib(_c: &IpoibConfig) -> Needs {
    // Two address handles: the peer's and the broadcast group's.
    one_connection(
        2,
        IpoibConfig::dma_bytes(),
        IpoibConfig::cq_entries(),
        IpoibConfig::work_requests(),
    )
}

pub(crate) fn user_verbs() -> Needs {
    // Every context may be open at once (an old one disassociated, a fresh one reopened),
    // each with its PD, CQ, MR and the queue pair its work creates.
    let n = uverbs::MAX_CONTEXTS as u32;
    Needs {
        consumers: n,
        pds: n,
        cqs: n,
        qps: n,
        mrs: n,
        ahs: 0,
        dma_bytes: aligned(uverbs::dma_bytes()),
        cq_entries: uverbs::CQ_ENTRIES,
        wr: uverbs::WORK_REQUESTS,
    }
}

/// A client the stack cannot serve, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("client {client}{}: {message}", key.map_or(String::new(), |k| format!(" `{k}`")))]
pub struct BudgetError {
    /// The client's index, in the order the clients were given (a stack's
    /// `StackSetup::clients`).
    pub client: usize,
    /// The client's key that sizes what is missing (`queue_depth`), or `None` when the
    /// client as a whole does not fit.
    pub key: Option<&'static str>,
    pub message: String,
}

/// What a client needs and the key that sizes it (a disk's queue depth: what runs out is
/// charged to it), or `None` for a client that takes nothing of the adapter.
pub type ClientNeeds = Option<(Needs, Option<&'static str>)>;

/// Checks that every client fits the adapter (`dev`) and the access layer (`al`), in the
/// order they start (what runs out is charged to the first client that would not get it).
pub fn check(
    dev: VerbsLimits,
    al: IbalConfig,
    clients: impl IntoIterator<Item = ClientNeeds>,
) -> Result<(), BudgetError> {
    let mut used = Needs::default();
    for (i, needs) in clients.into_iter().enumerate() {
        // What runs out is charged to the key that sizes it (a disk's queue depth), else to
        // the client as a whole.
        let Some((n, sized)) = needs else {
            continue;
        };
        let refuse = |key: Option<&'static str>, message: String| BudgetError {
            client: i,
            key,
            message,
        };
        let cq_max = dev.max_cq_entries.min(al.max_cq_entries);
        if n.cq_entries > cq_max {
            return Err(refuse(
                sized,
                format!(
                    "needs a completion queue of {} entries; the adapter's largest is {cq_max}",
                    n.cq_entries
                ),
            ));
        }
        let wr_max = dev.max_wr.min(al.max_wr);
        if n.wr > wr_max {
            return Err(refuse(
                sized,
                format!(
                    "needs a work queue of {} requests; the adapter's largest is {wr_max}",
                    n.wr
                ),
            ));
        }
        used = add(used, n);
        if used.dma_bytes > u64::from(dev.dma_bytes) {
            let left = u64::from(dev.dma_bytes).saturating_sub(used.dma_bytes - n.dma_bytes);
            return Err(refuse(
                sized,
                format!(
                    "needs {} bytes of DMA memory; the adapter has {} bytes, {left} left by \
                     the clients before it",
                    n.dma_bytes, dev.dma_bytes
                ),
            ));
        }
        if let Some(what) = over(&used, &dev, &al) {
            return Err(refuse(
                None,
                format!("the adapter runs out of {what} with this client"),
            ));
        }
    }
    Ok(())
}

pub(crate) fn add(a: Needs, b: Needs) -> Needs {
    Needs {
        consumers: a.consumers + b.consumers,
        pds: a.pds + b.pds,
        cqs: a.cqs + b.cqs,
        qps: a.qps + b.qps,
        mrs: a.mrs + b.mrs,
        ahs: a.ahs + b.ahs,
        dma_bytes: a.dma_bytes + b.dma_bytes,
        cq_entries: a.cq_entries.max(b.cq_entries),
        wr: a.wr.max(b.wr),
    }
}

/// The first object count past what the device or the access layer can hold, named.
fn over(used: &Needs, dev: &VerbsLimits, al: &IbalConfig) -> Option<String> {
    let limit = |d: u16, a: u16| u32::from(d.min(a));
    [
        (
            "access-layer consumers",
            used.consumers,
            u32::from(al.max_consumers),
        ),
        (
            "protection domains",
            used.pds,
            limit(dev.max_pds, al.max_pds),
        ),
        (
            "completion queues",
            used.cqs,
            limit(dev.max_cqs, al.max_cqs),
        ),
        ("queue pairs", used.qps, limit(dev.max_qps, al.max_qps)),
        ("memory regions", used.mrs, limit(dev.max_mrs, al.max_mrs)),
        ("address handles", used.ahs, limit(dev.max_ahs, al.max_ahs)),
    ]
    .into_iter()
    .find(|(_, n, max)| n > max)
    .map(|(what, n, max)| format!("{what} ({n} needed, {max} there)"))
}
