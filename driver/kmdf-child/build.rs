//! On Windows, wdk-build configures the link of a KMDF driver (WdfLdr.lib, WdfDriverEntry.lib,
//! the entry point and subsystem); elsewhere the crate builds its logic only.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(windows)]
    wdk_build::configure_wdk_binary_build()?;
    Ok(())
}
