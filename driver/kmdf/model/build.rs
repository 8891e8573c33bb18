//! Under `--cfg wdk_fake` the model gives the driver DbgPrint, a C variadic function, from a
//! C shim that formats and hands the text to the model (src/dbgprint.c). Otherwise nothing.

fn main() {
    println!("cargo:rerun-if-changed=src/dbgprint.c");
    if std::env::var_os("CARGO_CFG_WDK_FAKE").is_some() {
        cc::Build::new()
            .file("src/dbgprint.c")
            .compile("hcabus_model_dbgprint");
    }
}
