//! On Windows: wdk-build configures the link of a KMDF driver (WdfLdr.lib, WdfDriverEntry.lib,
//! the kernel's entry point and subsystem), and the event log's message table (messages.mc) is
//! compiled with mc.exe and rc.exe and linked in as a resource. Elsewhere there is nothing to
//! do: the crate builds its logic only, and wdk-build refuses to run outside a WDK
//! environment. The Windows half has never run (docs/windows.md).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=messages.mc");
    #[cfg(windows)]
    {
        wdk_build::configure_wdk_binary_build()?;
        message_table()?;
    }
    Ok(())
}

/// messages.mc -> messages.rc + MSG00001.bin (mc.exe) -> messages.res (rc.exe), linked in.
#[cfg(windows)]
fn message_table() -> Result<(), Box<dyn std::error::Error>> {
    use std::path::PathBuf;
    use std::process::Command;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let run = |cmd: &mut Command| -> Result<(), Box<dyn std::error::Error>> {
        let status = cmd.status()?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{cmd:?} failed: {status}").into())
        }
    };
    // -c: the customer bit in every id, as EventLogEntry::message_id writes them (without
    // it the table's ids would be 0x40AB.../0xC0AB... and Event Viewer would find no message
    // for any entry).
    run(Command::new("mc.exe")
        .arg("-c")
        .arg("-h")
        .arg(&out)
        .arg("-r")
        .arg(&out)
        .arg("messages.mc"))?;
    let res = out.join("messages.res");
    run(Command::new("rc.exe")
        .arg("/fo")
        .arg(&res)
        .arg(out.join("messages.rc")))?;
    println!("cargo:rustc-link-arg={}", res.display());
    Ok(())
}
