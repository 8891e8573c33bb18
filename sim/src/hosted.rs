//! Any [`Client`] on the threaded host: the access layer, IPoIB, the disks and user verbs
//! run here unchanged, as they would on the KMDF glue.
//!
//! [`Hosted`] keeps a client behind its own lock and turns it into an [`EventCallback`].
//! Its callbacks come from whichever thread drains the bus; its own work ([`Client::wake`])
//! comes from a worker thread ([`spawn_worker`]), the model of a child driver's work item.
//! Either way the client gets a [`ThreadCtx`] (the host's [`ClientCtx`]) whose calls reach
//! the bus at once while its drains are deferred: what a call sets in motion (other
//! clients' events, hardware steps) runs once the client has returned and its lock is free.
//! A client never hears an event from inside its own call, so it cannot deadlock on its own
//! lock, whatever thread it calls from.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::{self, JoinHandle};
use std::vec::Vec;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use hcabus::bus::Client;
use hcabus::host::threaded::{Callback, EventCallback, StdPlatform, ThreadedBus};
use hcabus::host::{ClientCtx, ClientView};
use hcabus::time::Instant;
use hcabus::types::*;

/// A client's view of the threaded bus for one callback or one wake-up.
pub type ThreadCtx<'a, D> = ClientCtx<'a, StdPlatform, D, ChaCha8Rng>;

struct Inner<C, D> {
    client: C,
    /// This client's handle on the adapter (a shared device locks per call).
    device: D,
    rng: ChaCha8Rng,
}

/// A client on the threaded host, behind its own lock.
pub struct Hosted<C, D> {
    inner: Mutex<Inner<C, D>>,
    me: Weak<Self>,
}

impl<C, D> core::fmt::Debug for Hosted<C, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Hosted").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A client that panicked in a callback was contained by the drainer; its state is its
    // own business, and the report still wants to read it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a worker thread needs of a hosted client, whatever its type.
pub trait Wake: Send + Sync {
    /// Runs the client's work if it is due; returns when it next wants to run.
    fn wake_if_due(&self, bus: &ThreadedBus) -> Option<Instant>;
}

impl<C, D> Hosted<C, D>
where
    C: for<'a> Client<ThreadCtx<'a, D>> + Send + 'static,
    D: Send + 'static,
{
    /// Starts `client` on `bus` with its own `device` handle and a generator from `seed`:
    /// [`Client::start`] runs at once (it typically registers), then what it set in motion.
    pub fn start(bus: &ThreadedBus, client: C, device: D, seed: u64) -> Arc<Self> {
        let hosted = Arc::new_cyclic(|me| Hosted {
            inner: Mutex::new(Inner {
                client,
                device,
                rng: ChaCha8Rng::seed_from_u64(seed),
            }),
            me: me.clone(),
        });
        hosted.with_ctx(ClientView::of(bus), |client, ctx| client.start(ctx));
        hosted
    }

    /// Runs `f` on the client with a context, then drains what its calls queued.
    fn with_ctx<R>(
        &self,
        bus: ClientView<'_, StdPlatform>,
        f: impl FnOnce(&mut C, &mut ThreadCtx<'_, D>) -> R,
    ) -> R {
        // Upgrading cannot fail while a caller holds an `Arc` of this client (every caller
        // does); a coerced clone of it is what the bus keeps for the ids it registers.
        let me: Option<Callback> = self.me.upgrade().map(|a| a as Callback);
        let Some(me) = me else {
            unreachable!("a hosted client is only reached through its Arc")
        };
        // Drains deferred while the client's lock is held: a delivery to this very client
        // would take it again.
        let (r, called) = StdPlatform::deferring(|| {
            let mut inner = lock(&self.inner);
            let Inner {
                client,
                device,
                rng,
            } = &mut *inner;
            let mut ctx = bus.ctx(device, rng, &me);
            let r = f(client, &mut ctx);
            (r, ctx.called())
        });
        if called {
            bus.kick();
        }
        r
    }

    /// Reads the client (its statistics, its events) under its lock.
    pub fn inspect<R>(&self, f: impl FnOnce(&C) -> R) -> R {
        f(&lock(&self.inner).client)
    }
}

impl<C, D> EventCallback for Hosted<C, D>
where
    C: for<'a> Client<ThreadCtx<'a, D>> + Send + 'static,
    D: Send + 'static,
{
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        self.with_ctx(bus, |client, ctx| client.on_event(ctx, id, event));
    }
}

impl<C, D> Wake for Hosted<C, D>
where
    C: for<'a> Client<ThreadCtx<'a, D>> + Send + 'static,
    D: Send + 'static,
{
    fn wake_if_due(&self, bus: &ThreadedBus) -> Option<Instant> {
        let now = bus.now();
        let due = lock(&self.inner).client.next_wake();
        if due.is_some_and(|t| t <= now) {
            self.with_ctx(ClientView::of(bus), |client, ctx| client.wake(ctx));
            return lock(&self.inner).client.next_wake();
        }
        due
    }
}

/// Longest a worker sleeps: a client's next wake-up can move earlier from a callback (a
/// RESET_END asks for work at once), and nothing signals the worker.
const WORKER_NAP: std::time::Duration = std::time::Duration::from_millis(1);

/// A thread that runs `client`'s work when it is due, until `stop` is set.
fn spawn_worker(
    bus: Arc<ThreadedBus>,
    client: Arc<dyn Wake>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name("hcabus-client".into())
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let next = client.wake_if_due(&bus);
                let now = bus.now();
                let wait = next.map_or(WORKER_NAP, |t| {
                    std::time::Duration::from_micros(t.saturating_since(now).as_us())
                });
                if wait.is_zero() {
                    thread::yield_now();
                } else {
                    thread::sleep(wait.min(WORKER_NAP));
                }
            }
        })
}

/// One worker thread per hosted client; dropping them stops and joins every thread.
#[derive(Debug)]
pub struct Workers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Spawns a worker for each client. On a spawn failure the ones already running are
    /// stopped (by the drop of what was built) and the error is returned.
    pub fn spawn(
        bus: &Arc<ThreadedBus>,
        clients: impl IntoIterator<Item = Arc<dyn Wake>>,
    ) -> std::io::Result<Self> {
        let mut workers = Workers {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        for client in clients {
            let t = spawn_worker(Arc::clone(bus), client, workers.stop.clone())?;
            workers.threads.push(t);
        }
        Ok(workers)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            // A worker that panicked has already reported it on stderr; the join only
            // collects the thread.
            let _ = t.join();
        }
    }
}
