//! A C client's event callback as the threaded host calls it.

use std::ffi::c_void;

use hcabus::bus_abi::HcabusEvent;
use hcabus::sim::{EventCallback, ThreadedBus};
use hcabus::types::{ClientId, Event};

/// `void (*)(void *client_context, const HCABUS_EVENT *event)` and its context.
#[derive(Debug)]
pub(crate) struct CCallback {
    pub(crate) function: unsafe extern "C" fn(*mut c_void, *const HcabusEvent),
    pub(crate) context: *mut c_void,
}

// SAFETY: the C contract (docs/bus-interface.md, hcabus.h) is that a callback may be invoked
// on any thread, as a DPC would run it on any processor; the context is the client's own and
// the bus never dereferences it, only hands it back.
unsafe impl Send for CCallback {}
// SAFETY: as above; the bus only copies the two pointers.
unsafe impl Sync for CCallback {}

impl EventCallback for CCallback {
    fn on_event(&self, _bus: &ThreadedBus, id: ClientId, event: Event) {
        let event = HcabusEvent::new(id, event);
        // SAFETY: the function and context are what the client registered; the event lives
        // on this stack frame for the whole call, which is all the header promises.
        unsafe { (self.function)(self.context, &event) };
    }
}
