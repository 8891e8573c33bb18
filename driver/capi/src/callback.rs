//! A C client's event callback as the threaded host calls it.

use std::sync::Arc;

use hcabus::host::{ClientView, EventCallback, StdPlatform};
use hcabus::types::{ClientId, Event};
use hcabus_cabi::CCallback;

/// The threaded host's callback for a C client.
#[derive(Debug)]
struct Deliver(CCallback);

impl EventCallback for Deliver {
    fn on_event(&self, _bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        self.0.deliver(id, event);
    }
}

/// What the bus keeps for a C client's function and context.
pub(crate) fn callback_of(callback: CCallback) -> Arc<dyn EventCallback> {
    Arc::new(Deliver(callback))
}
