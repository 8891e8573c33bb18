//! The model's scenarios on the driver image, from `cargo test --workspace`: with
//! `HCABUS_IMAGE` naming a .sys (CI sets it to what ../shared/wdk-kit/linkcheck.sh links),
//! this runs the image tests of the KMDF model through ../shared/wdk-kit/hosttest.sh, the
//! one way this crate's model builds (it needs the kit's bindings of the KMDF headers), and
//! prints their line: `image: N scenarios passed on sha256 HEX`. Without the variable, or
//! without the kit, it says it skipped and why.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

#[test]
fn the_models_scenarios_pass_on_the_image() {
    let image = std::env::var("HCABUS_IMAGE").unwrap_or_default();
    if image.is_empty() {
        println!(
            "image: skipped: HCABUS_IMAGE names no driver image (../shared/wdk-kit/linkcheck.sh \
             links target/wdk-kit/link/hcabus_kmdf.sys; .ci/run sets it)"
        );
        return;
    }
    let kit = root().join("../shared/wdk-kit/hosttest.sh");
    if !kit.is_file() {
        println!(
            "image: skipped: {} is absent (the KMDF model builds only with the kit's bindings)",
            kit.display()
        );
        return;
    }
    assert!(
        Path::new(&image).is_file(),
        "HCABUS_IMAGE={image}: no such file"
    );
    let out = Command::new("bash")
        .arg(&kit)
        .arg(".")
        .args(["image::run", "--nocapture"])
        .current_dir(root())
        .env("HCABUS_IMAGE", &image)
        .env("WDK_KIT_PACKAGE", env!("CARGO_PKG_NAME"))
        .output()
        .expect("hosttest.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the image's tests failed:\n{stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("image: ") && l.contains(" scenarios passed on sha256 "))
        .unwrap_or_else(|| panic!("no `image: N scenarios passed` line in:\n{stdout}"));
    println!("{line}");
    // With HCABUS_CHILD_IMAGE (inherited), the child driver's image ran beside it.
    if let Some(two) = stdout.lines().find(|l| l.starts_with("image+child: ")) {
        println!("{two}");
    }
}
