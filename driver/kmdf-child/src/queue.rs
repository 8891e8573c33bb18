//! The child's I/O queue as its state machine wants it and as KMDF has it. Two threads may
//! decide changes at once (the bus's DPC delivering RESET_END while a completion runs the
//! queue's stop callback), and a KMDF call cannot be made under the child's spin lock (the stop
//! callback may come from inside WdfIoQueueStop): so one thread at a time carries changes out,
//! and after each call looks again, under the lock, for a change decided meanwhile. The queue
//! then always ends as last decided, whatever order the threads ran in. A stop asks KMDF for
//! its callback only when none is outstanding (a second is a WDF_VIOLATION bugcheck), and a
//! quiesce executes only on a callback its own stop asked for.
#![forbid(unsafe_code)]

/// A change of the queue's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// WdfIoQueueStop with the stop callback.
    Stop,
    /// WdfIoQueueStop without a callback: the queue holds what comes.
    Close,
    /// WdfIoQueueStart.
    Start,
    /// WdfIoQueuePurge: what waits fails, and so does what comes.
    Purge,
}

/// A change for the KMDF layer to carry out: [`QueueBook::performing`] under the lock, the
/// KMDF call with the lock dropped, then [`QueueBook::applied`] under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueOp {
    pub change: Change,
    /// Which decision it carries out.
    pub generation: u32,
}

/// What the stop callback means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Nothing quiesces: a callback left from a stop since overtaken.
    Nothing,
    /// The quiesce of this epoch stopped the queue itself and the driver owns nothing.
    Quiet(u64),
    /// A quiesce waits, but on a callback its own stop did not ask for (the queue may have
    /// been open when it came): ask again, carrying this out unless another thread is.
    StopAgain(Option<QueueOp>),
}

/// The queue's books.
#[derive(Debug, Clone)]
pub struct QueueBook {
    want: Change,
    generation: u32,
    applying: bool,
    idle_outstanding: bool,
    /// The quiesce whose own stop asked for the callback outstanding (or come).
    stopped_for: Option<u64>,
}

impl Default for QueueBook {
    fn default() -> Self {
        QueueBook::new()
    }
}

impl QueueBook {
    /// A queue as KMDF creates it: accepting and dispatching.
    pub const fn new() -> QueueBook {
        QueueBook {
            want: Change::Start,
            generation: 0,
            applying: false,
            idle_outstanding: false,
            stopped_for: None,
        }
    }

    /// A change decided: the op to carry out now, or `None` while another thread carries
    /// changes out (it carries this one out next).
    pub fn want(&mut self, change: Change) -> Option<QueueOp> {
        self.want = change;
        self.generation = self.generation.wrapping_add(1);
        if change != Change::Stop {
            self.stopped_for = None;
        }
        if self.applying {
            return None;
        }
        self.applying = true;
        Some(QueueOp {
            change,
            generation: self.generation,
        })
    }

    /// Right before the KMDF call: the call to make. A stop asks for the callback only for a
    /// quiesce under way (`quiescing`, its epoch) and with none outstanding; else it only
    /// closes the queue.
    pub fn performing(&mut self, op: QueueOp, quiescing: Option<u64>) -> Change {
        match (op.change, quiescing) {
            (Change::Stop, Some(epoch)) if !self.idle_outstanding => {
                self.idle_outstanding = true;
                self.stopped_for = Some(epoch);
                Change::Stop
            }
            (Change::Stop, _) => Change::Close,
            (other, _) => other,
        }
    }

    /// After the KMDF call: the next op when a change was decided meanwhile, else `None` and
    /// this thread is done.
    pub fn applied(&mut self, op: QueueOp) -> Option<QueueOp> {
        if op.generation == self.generation {
            self.applying = false;
            return None;
        }
        Some(QueueOp {
            change: self.want,
            generation: self.generation,
        })
    }

    /// A thread gave up carrying changes out (its bound spent, logged): another may start.
    pub fn abandon(&mut self) {
        self.applying = false;
    }

    /// The stop callback came; `quiescing` is the epoch of the quiesce under way, if one is.
    pub fn idle(&mut self, quiescing: Option<u64>) -> Idle {
        self.idle_outstanding = false;
        match quiescing {
            None => Idle::Nothing,
            Some(epoch) if self.stopped_for == Some(epoch) => Idle::Quiet(epoch),
            Some(_) => Idle::StopAgain(self.want(Change::Stop)),
        }
    }
}
