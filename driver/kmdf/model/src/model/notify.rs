//! PnP state-change notifications (WdfDeviceInitRegisterPnpStateChangeCallback), the one
//! way a KMDF driver hears that a stop it allowed was cancelled: KMDF has no
//! EvtDeviceQueryStop counterpart, and IRP_MN_CANCEL_STOP_DEVICE moves the FDO from
//! WdfDevStatePnpQueryStopPending to WdfDevStatePnpQueryCanceled with no driver callback
//! (pnpstatemachine.cpp, PnpEventQueryCanceled); a callback registered for entering that
//! state is called (PnpEnterNewState).

use wdk_sys::*;

use super::driver::DriverFn;
use super::machine::{at, Machine};
use super::{violation, with, Rule, PASSIVE};

/// One registration: the state, the callback, the notification types (enter, post
/// process, leave).
#[derive(Clone, Copy)]
pub(crate) struct PnpNotify {
    state: WDF_DEVICE_PNP_STATE,
    callback: PFN_WDF_DEVICE_PNP_STATE_CHANGE_NOTIFICATION,
    types: ULONG,
}

/// StateNotificationEnterState | PostProcessState | LeaveState.
const ALL_TYPES: ULONG = 0x7;

pub(crate) unsafe extern "C" fn WdfDeviceInitRegisterPnpStateChangeCallback(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    state: WDF_DEVICE_PNP_STATE,
    callback: PFN_WDF_DEVICE_PNP_STATE_CHANGE_NOTIFICATION,
    types: ULONG,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceInitRegisterPnpStateChangeCallback";
    let _kernel = super::enter(DDI, PASSIVE);
    if callback.is_none() {
        violation(Rule::NullParameter, DDI, "a NULL callback");
    }
    use _WDF_DEVICE_PNP_STATE::*;
    // fxdeviceinitapi.cpp: a state outside the PnP machine's, or no notification type, is
    // STATUS_INVALID_PARAMETER.
    if !(WdfDevStatePnpObjectCreated..WdfDevStatePnpNull).contains(&state)
        || types == 0
        || types & !ALL_TYPES != 0
    {
        return with(|k| {
            k.refuse(
                DDI,
                STATUS_INVALID_PARAMETER,
                "a state outside the PnP machine's, or no notification type",
            )
        });
    }
    with(|k| {
        k.init(DDI, init).pnp_notify.push(PnpNotify {
            state,
            callback,
            types,
        });
        STATUS_SUCCESS
    })
}

impl Machine {
    /// IRP_MN_CANCEL_STOP_DEVICE after a query-stop the driver allowed: KMDF enters
    /// WdfDevStatePnpQueryCanceled and calls what was registered for entering it.
    pub(crate) fn cancel_stop(&mut self) {
        let fdo = self
            .fdo
            .unwrap_or_else(|| violation(Rule::Expectation, "cancel stop", "no FDO"));
        use _WDF_DEVICE_PNP_STATE::*;
        let entered = WdfDevStatePnpQueryCanceled;
        let callbacks: Vec<PnpNotify> = with(|k| k.device(fdo).pnp_notify.clone());
        for n in callbacks
            .iter()
            .filter(|n| n.state == entered && n.types & 1 != 0)
        {
            let data = WDF_DEVICE_PNP_NOTIFICATION_DATA {
                Type: _WDF_STATE_NOTIFICATION_TYPE::StateNotificationEnterState,
                Data: _WDF_DEVICE_PNP_NOTIFICATION_DATA__bindgen_ty_1 {
                    EnterState: _WDF_DEVICE_PNP_NOTIFICATION_DATA__bindgen_ty_1__bindgen_ty_1 {
                        CurrentState: WdfDevStatePnpQueryStopPending,
                        NewState: entered,
                    },
                },
            };
            if let Some(f) = n.callback {
                // SAFETY: the driver's callback for its FDO, with data that lives for the
                // call, at PASSIVE_LEVEL as KMDF calls it from its PnP state machine.
                at("EvtDevicePnpStateChange", PASSIVE, || unsafe {
                    f.run((fdo as WDFDEVICE, &raw const data))
                });
            }
        }
    }
}
