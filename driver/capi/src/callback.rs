//! A C client's event callback as the threaded host calls it.

use hcabus::sim::{EventCallback, ThreadedBus};
use hcabus::types::{ClientId, Event};
use hcabus_cabi::CCallback;

/// The threaded host's callback for a C client.
#[derive(Debug)]
pub(crate) struct Deliver(pub(crate) CCallback);

impl EventCallback for Deliver {
    fn on_event(&self, _bus: &ThreadedBus, id: ClientId, event: Event) {
        self.0.deliver(id, event);
    }
}
