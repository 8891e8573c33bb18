//! hcabus-kmdf-model: a kernel that loads a driver. A model of KMDF 1.33 and the Windows
//! kernel beneath it (the WDF function table, the WDM exports the driver imports, PnP and
//! power, DPCs, timers and work items, spin locks and rundown, the clock tick, the pool,
//! several processors), with the rules KMDF's own source and the WDK's documentation state.
//! It loads the hcabus KMDF driver as Windows does: calls its entry by address, binds the
//! function table through WdfVersionBind (the image) or the table symbol (the Linux build),
//! and calls the callbacks through the pointers the driver registered.
//!
//! Two ways to hand it the driver: hcabus-kmdf built for Linux under `--cfg wdk_fake`,
//! linked into this crate's test binary, or the .sys image linkcheck links, loaded from
//! `HCABUS_IMAGE` (src/model/image/). The scenarios run on both. Nothing the product builds
//! depends on this crate; its only consumer is its own tests.
//!
//! The Linux build of the layer meets the model at the symbols the model defines: the
//! kernel's exports and `WdfFunctions_01033` as on Windows, and three of its own that stand
//! in for what Linux cannot give the layer (`hcabus_model_register_read`/`_write` for the
//! mapped BAR, `hcabus_model_point` for a processor switch at each shared atomic).

/// docs/sdv-rules.md, checked against the model's rules and tests (on every host).
#[cfg(test)]
mod catalog;

/// The model: built where the layer builds on Linux (`--cfg wdk_fake`, the kit's bindings).
#[cfg(all(test, wdk_fake))]
mod model;
