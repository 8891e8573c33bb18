//! On Windows, wdk-build configures the link of a KMDF driver (WdfLdr.lib, WdfDriverEntry.lib,
//! the kernel's entry point and subsystem). Elsewhere there is nothing to do: the crate builds
//! its logic only, and wdk-build refuses to run outside a WDK environment.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(windows)]
    wdk_build::configure_wdk_binary_build()?;
    Ok(())
}
