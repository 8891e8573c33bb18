//! Compiles the C child drivers and the layout table against driver/include/hcabus.h.

fn main() {
    let files = ["c/layout.c", "c/children.c", "c/bad_input.c", "c/churn.c"];
    for f in files.iter().chain(&[
        "c/child.h",
        "../include/hcabus_sim.h",
        "../../include/hcabus.h",
    ]) {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .files(files)
        .include("../../include")
        .include("../include")
        .include("c")
        .std("c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag("-pthread")
        .compile("hcabus_ctests");
    println!("cargo:rustc-link-lib=pthread");
}
