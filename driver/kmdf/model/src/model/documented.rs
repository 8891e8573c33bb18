//! Each DDI the model gives, held to its documented maximum IRQL: the model refuses a call
//! above it (`model::enter`), and nothing at or below it. For the KMDF functions the levels
//! are the KMDF 1.33 headers' SAL annotations (`_IRQL_requires_max_`; where a `_When_` on a
//! Wait or Timeout parameter gives two, the level with the wait first), for the WDM exports
//! the WDK's reference pages. The test reads the model's source: the levels each function
//! passes to `enter` (or `parent_of`), in order, must be the documented ones.

use std::path::Path;

/// (the model's function, the levels its `enter` names, in order).
const DOCUMENTED: &[(&str, &[&str])] = &[
    (
        "WdfChildListAddOrUpdateChildDescriptionAsPresent",
        &["DISPATCH"],
    ),
    ("WdfChildListBeginScan", &["DISPATCH"]),
    ("WdfChildListEndScan", &["DISPATCH"]),
    ("WdfChildListGetDevice", &["DISPATCH"]),
    ("WdfCmResourceListGetCount", &["DISPATCH"]),
    ("WdfCmResourceListGetDescriptor", &["DISPATCH"]),
    ("WdfControlDeviceInitAllocate", &["PASSIVE"]),
    ("WdfControlFinishInitializing", &["DISPATCH"]),
    ("WdfDeviceAddQueryInterface", &["PASSIVE"]),
    ("WdfDeviceCreate", &["PASSIVE"]),
    ("WdfDeviceCreateSymbolicLink", &["PASSIVE"]),
    ("WdfDeviceGetDriver", &["DISPATCH"]),
    ("WdfDeviceInitAssignName", &["PASSIVE"]),
    ("WdfDeviceInitFree", &["DISPATCH"]),
    ("WdfDeviceInitRegisterPnpStateChangeCallback", &["PASSIVE"]),
    ("WdfDeviceInitSetDeviceType", &["DISPATCH"]),
    ("WdfDeviceInitSetPnpPowerEventCallbacks", &["DISPATCH"]),
    ("WdfDeviceSetSpecialFileSupport", &["DISPATCH"]),
    ("WdfDeviceWdmGetDeviceObject", &["DISPATCH"]),
    // _When_(Wait == TRUE, PASSIVE_LEVEL), _When_(Wait == FALSE, HIGH_LEVEL).
    ("WdfDpcCancel", &["PASSIVE", "HIGH"]),
    ("WdfDpcEnqueue", &["HIGH"]),
    ("WdfDpcGetParentObject", &["HIGH"]),
    ("WdfDriverCreate", &["PASSIVE"]),
    ("WdfDriverOpenParametersRegistryKey", &["PASSIVE"]),
    ("WdfFdoGetDefaultChildList", &["DISPATCH"]),
    ("WdfFdoInitQueryProperty", &["PASSIVE"]),
    ("WdfFdoInitSetDefaultChildListConfig", &["PASSIVE"]),
    ("WdfFdoQueryForInterface", &["PASSIVE"]),
    ("WdfIoQueueCreate", &["DISPATCH"]),
    ("WdfIoQueueGetDevice", &["DISPATCH"]),
    ("WdfIoQueuePurge", &["DISPATCH"]),
    ("WdfIoQueueStart", &["DISPATCH"]),
    ("WdfIoQueueStop", &["DISPATCH"]),
    ("WdfRequestForwardToIoQueue", &["DISPATCH"]),
    ("WdfDeviceCreateDeviceInterface", &["PASSIVE"]),
    ("WdfObjectDelete", &["DISPATCH"]),
    ("WdfObjectDereferenceActual", &["DISPATCH"]),
    // _IRQL_requires_max_(DISPATCH_LEVEL+1).
    ("WdfObjectGetTypedContextWorker", &["DISPATCH_PLUS_ONE"]),
    ("WdfObjectReferenceActual", &["DISPATCH"]),
    ("WdfPdoInitAddDeviceText", &["PASSIVE"]),
    ("WdfPdoInitAddHardwareID", &["PASSIVE"]),
    ("WdfPdoInitAssignDeviceID", &["PASSIVE"]),
    ("WdfPdoInitAssignInstanceID", &["PASSIVE"]),
    ("WdfPdoInitSetDefaultLocale", &["PASSIVE"]),
    ("WdfRegistryClose", &["PASSIVE"]),
    ("WdfRegistryQueryULong", &["PASSIVE"]),
    ("WdfRequestCompleteWithInformation", &["DISPATCH"]),
    ("WdfRequestRetrieveInputBuffer", &["DISPATCH"]),
    ("WdfRequestRetrieveOutputBuffer", &["DISPATCH"]),
    ("WdfRequestWdmGetIrp", &["DISPATCH"]),
    ("WdfSpinLockAcquire", &["DISPATCH"]),
    ("WdfSpinLockCreate", &["DISPATCH"]),
    ("WdfSpinLockRelease", &["DISPATCH"]),
    ("WdfTimerGetParentObject", &["DISPATCH"]),
    ("WdfTimerStart", &["DISPATCH"]),
    // _When_(Wait == TRUE, PASSIVE_LEVEL), _When_(Wait == FALSE, DISPATCH_LEVEL).
    ("WdfTimerStop", &["PASSIVE", "DISPATCH"]),
    // The reference page: no timeout, PASSIVE_LEVEL; a timeout, DISPATCH_LEVEL.
    ("WdfWaitLockAcquire", &["PASSIVE", "DISPATCH"]),
    ("WdfWaitLockCreate", &["DISPATCH"]),
    ("WdfWaitLockRelease", &["DISPATCH"]),
    ("WdfWorkItemEnqueue", &["DISPATCH"]),
    ("WdfWorkItemFlush", &["PASSIVE"]),
    ("WdfWorkItemGetParentObject", &["DISPATCH"]),
    ("WdfWorkItemCreate", &["DISPATCH"]),
    ("WdfTimerCreate", &["DISPATCH"]),
    ("WdfDpcCreate", &["DISPATCH"]),
    // The WDM exports: "IRQL: any level" is HIGH_LEVEL.
    ("KeGetCurrentIrql", &["HIGH"]),
    ("KeQueryUnbiasedInterruptTime", &["HIGH"]),
    ("PsGetCurrentThreadId", &["HIGH"]),
    ("KeQuerySystemTimePrecise", &["HIGH"]),
    ("KeDelayExecutionThread", &["APC"]),
    ("MmMapIoSpaceEx", &["DISPATCH"]),
    ("MmUnmapIoSpace", &["DISPATCH"]),
    ("IoAllocateErrorLogEntry", &["DISPATCH"]),
    ("IoWriteErrorLogEntry", &["DISPATCH"]),
    ("ExInitializeRundownProtection", &["APC"]),
    ("ExReInitializeRundownProtection", &["APC"]),
    ("ExAcquireRundownProtection", &["DISPATCH"]),
    ("ExReleaseRundownProtection", &["DISPATCH"]),
    ("ExWaitForRundownProtectionRelease", &["APC"]),
    ("EtwRegister", &["PASSIVE"]),
    ("EtwUnregister", &["PASSIVE"]),
    ("EtwEventEnabled", &["HIGH"]),
    ("EtwWriteTransfer", &["HIGH"]),
    ("EtwSetInformation", &["PASSIVE"]),
    ("MmGetSystemRoutineAddress", &["PASSIVE"]),
    // The image's: ExAllocatePool2 and ExFreePool (non-paged), KeBugCheckEx.
    ("ex_allocate_pool2", &["DISPATCH"]),
    ("ex_free_pool", &["DISPATCH"]),
    ("ke_bug_check_ex", &["HIGH"]),
];

const LEVELS: [&str; 5] = ["PASSIVE", "APC", "DISPATCH", "DISPATCH_PLUS_ONE", "HIGH"];

/// The model's source, every file.
fn source() -> String {
    let mut text = String::new();
    for dir in ["src/model", "src/model/image"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut files: Vec<_> = std::fs::read_dir(&path)
            .expect("the model's source")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        for f in files {
            text.push_str(&std::fs::read_to_string(&f).expect("a source file"));
        }
    }
    text
}

/// The levels the first call of `function`'s body to `enter` or a helper that takes the level
/// (`parent_of`, `create_sync`, `pdo_init`, `scan`) names, in order; for a function a macro makes (`deferred_creates!`), its line there.
fn levels_of(source: &str, function: &str) -> Option<Vec<String>> {
    let text = match source.find(&format!("fn {function}(")) {
        Some(start) => {
            let body = &source[start..];
            let body = &body[..body.find("\n}\n").unwrap_or(body.len())];
            let call = ["enter(", "parent_of(", "create_sync(", "pdo_init(", "scan("]
                .iter()
                .filter_map(|c| body.find(c))
                .min()?;
            let args = &body[call..];
            &args[..args.find(';').unwrap_or(args.len())]
        }
        None => {
            let at = source.find(&format!("\n    {function}("))?;
            let line = &source[at + 1..];
            &line[..line.find(") =>")?]
        }
    };
    Some(
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| LEVELS.contains(w))
            .map(String::from)
            .collect(),
    )
}

#[test]
fn every_ddi_the_model_gives_checks_its_documented_irql() {
    let source = source();
    let mut wrong = Vec::new();
    for (function, documented) in DOCUMENTED {
        match levels_of(&source, function) {
            Some(levels) if levels == *documented => {}
            Some(levels) => wrong.push(format!(
                "{function}: the model checks {levels:?}, documented {documented:?}"
            )),
            None => wrong.push(format!("{function}: not found, or no enter()")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every KMDF function of the model's table is in the list.
    for entry in source.split("entry!(").skip(1) {
        let Some(name) = entry
            .split_whitespace()
            .next()
            .and_then(|w| w.strip_suffix("TableIndex,"))
        else {
            continue;
        };
        assert!(
            DOCUMENTED.iter().any(|(f, _)| *f == name),
            "{name} is in the model's table and not in DOCUMENTED"
        );
    }
}
