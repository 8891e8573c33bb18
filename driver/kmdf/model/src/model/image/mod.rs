//! The driver image (the .sys linkcheck links) loaded into the scenario's process and run
//! natively, as ndiswrapper and loadlibrary run Windows code on Linux: mapped and relocated
//! (`pe.rs`), its imports bound to the model's DDIs through stubs that take the Windows x64
//! convention to the host's (`switch.rs`), its callbacks called on a 24 KiB stack with a
//! guard page below (`stacks.rs`), its register accesses, the volatile loads and stores the
//! Linux build replaces with `register_read`/`register_write`, taken by the page fault they
//! make on the model's register window and done by the model's device (`trap.rs`).
//!
//! docs/windows.md ("The image, run") says why natively and not under an emulator, and what
//! only Windows can still prove.

pub(crate) mod memory;
mod pe;
mod pool;
#[cfg(test)]
pub(crate) mod run;
pub(crate) mod stacks;
mod switch;
#[cfg(test)]
pub(crate) mod tests;
pub(crate) mod trap;

use std::string::String;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::vec::Vec;

use wdk_sys::*;

use memory::Region;
pub(crate) use pe::LoadError;
pub(crate) use switch::{restore, save};

/// The image slots: the bus's, and the sample child driver's (driver/kmdf-child), loaded
/// beside it when a scenario runs both.
pub(crate) const BUS: usize = 0;
pub(crate) const CHILD: usize = 1;
const SLOTS: usize = 2;

/// A loaded image, for the scenario's process.
pub(crate) struct Image {
    /// Its slot: [`BUS`] or [`CHILD`].
    pub(crate) slot: usize,
    mapped: pe::Mapped,
    /// The KMDF function table WdfVersionBind hands it: a stub per DDI the model gives, an
    /// address in [`Image::unmodelled`] (index = offset) for each it does not.
    table: Vec<usize>,
    /// One page that faults on execution: a call through the table to a DDI the model does
    /// not give lands at its index here (`trap.rs` names it).
    pub(crate) unmodelled: Region,
    globals: Box<WDF_DRIVER_GLOBALS>,
}

// SAFETY: the image is read-only after loading (its memory is the driver's, reached only
// through the addresses it holds); the globals block is written by nobody.
unsafe impl Sync for Image {}
// SAFETY: as above.
unsafe impl Send for Image {}

static IMAGES: [OnceLock<Image>; SLOTS] = [OnceLock::new(), OnceLock::new()];

/// The stubs: pages of code, each stub a `(target, address)`.
struct Stubs {
    pages: Vec<Region>,
    used: usize,
    made: Vec<(usize, usize)>,
}

static STUBS: Mutex<Stubs> = Mutex::new(Stubs {
    pages: Vec::new(),
    used: 0,
    made: Vec::new(),
});

const STUB_SIZE: usize = 32;

/// The address the image calls to reach the model's System V function `target` (one stub
/// per target, made once).
pub(crate) fn stub(target: usize) -> usize {
    super::uncounted(|| stub_uncounted(target))
}

fn stub_uncounted(target: usize) -> usize {
    let mut s = STUBS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, at)) = s.made.iter().find(|(t, _)| *t == target) {
        return at;
    }
    if s.pages.is_empty() || s.used + STUB_SIZE > memory::PAGE {
        let mut page = Region::reserve(memory::PAGE).expect("a page for stubs");
        page.protect(0, memory::PAGE, true, true)
            .expect("stubs' page writable and executable");
        s.pages.push(page);
        s.used = 0;
    }
    let used = s.used;
    let page = s.pages.last_mut().expect("a page");
    let at = page.base() + used;
    page.bytes_mut()[used..used + 22].copy_from_slice(&switch::stub_code(target));
    s.used += STUB_SIZE;
    s.made.push((target, at));
    at
}

/// Loads the bus's image at `path` and binds it to the model: once per process.
pub(crate) fn load(path: &str) -> Result<&'static Image, LoadError> {
    load_slot(BUS, path, "hcabus")
}

/// Loads the image at `path` into `slot`, its driver named `name` (the service's name, which
/// KMDF gives its globals' DriverName): once per slot and process. WDF calls are told apart
/// by the globals each image was bound to ([`slot_of_globals`]).
pub(crate) fn load_slot(slot: usize, path: &str, name: &str) -> Result<&'static Image, LoadError> {
    let cell = &IMAGES[slot];
    if cell.get().is_some() {
        return Err(LoadError::AlreadyLoaded);
    }
    let data = std::fs::read(path).map_err(|e| LoadError::Read(path.into(), e))?;
    let mut resolve = |dll: &str, name: &str| resolve(dll, name, slot).map(stub);
    let mapped = pe::map(&data, &mut resolve)?;
    let unmodelled = Region::reserve(memory::PAGE).map_err(LoadError::Map)?;
    let table = function_table(unmodelled.base());
    // SAFETY: all-zero is a valid WDF_DRIVER_GLOBALS (integers, a NULL pointer, a name).
    let mut globals: Box<WDF_DRIVER_GLOBALS> = Box::new(unsafe { core::mem::zeroed() });
    for (to, from) in globals.DriverName.iter_mut().zip(name.bytes()) {
        *to = from as _;
    }
    let image = Image {
        slot,
        mapped,
        table,
        unmodelled,
        globals,
    };
    cell.set(image).map_err(|_| LoadError::AlreadyLoaded)?;
    super::driver::set_image();
    Ok(cell.get().expect("just set"))
}

/// The pool the image holds now, in bytes (its heap: what the footprint counts).
pub(crate) fn pool_bytes() -> usize {
    pool::outstanding().1
}

/// At the driver's unload: the pool it held is all given back.
pub(crate) fn unload() {
    pool::unload();
}

/// Code the tests wrote to run as the image's would (`tests.rs`): each page of it.
#[cfg(test)]
static TEST_CODE: Mutex<Vec<Region>> = Mutex::new(Vec::new());

/// `bytes` of machine code in a page that may run, as the image's code: its address.
#[cfg(test)]
pub(crate) fn test_code(bytes: &[u8]) -> usize {
    let mut page = Region::reserve(bytes.len()).expect("a page of code");
    let len = page.len();
    page.protect(0, len, true, true)
        .expect("writable and executable");
    page.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
    let at = page.base();
    TEST_CODE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(page);
    at
}

/// Whether `rip` is the driver's code: the image's text (or a test's), where a fault on the
/// register window is the driver's register access (from the fault handler: never waits).
pub(crate) fn is_driver_code(rip: usize) -> bool {
    #[cfg(test)]
    if TEST_CODE
        .try_lock()
        .is_ok_and(|pages| pages.iter().any(|p| p.contains(rip)))
    {
        return true;
    }
    IMAGES
        .iter()
        .any(|i| i.get().is_some_and(|i| i.in_text(rip)))
}

/// The bus's image, if the driver is one.
pub(crate) fn get() -> Option<&'static Image> {
    IMAGES[BUS].get()
}

/// The image in `slot`, if one is loaded there.
pub(crate) fn get_slot(slot: usize) -> Option<&'static Image> {
    IMAGES.get(slot)?.get()
}

/// Every image loaded.
pub(crate) fn loaded() -> impl Iterator<Item = &'static Image> {
    IMAGES.iter().filter_map(OnceLock::get)
}

/// The slot of the image whose WDF calls pass `globals` (what WdfVersionBind handed it);
/// `None` for globals no image was given (the Linux build's NULL).
pub(crate) fn slot_of_globals(globals: PWDF_DRIVER_GLOBALS) -> Option<usize> {
    loaded()
        .find(|i| core::ptr::eq(&*i.globals, globals.cast_const()))
        .map(|i| i.slot)
}

impl Image {
    /// FxDriverEntry's address.
    pub(crate) fn entry(&self) -> usize {
        self.mapped.entry
    }

    pub(crate) fn imports(&self) -> &[String] {
        &self.mapped.imports
    }

    /// The image as a fresh load leaves it (its data sections as relocated, nothing of a
    /// previous driver's life in them), and the pool empty: each boot of the machine, and
    /// each load of the child's driver. The pool is the bus's: the child's image imports no
    /// pool function (docs/child-driver.md), so one pool is the bus's alone.
    pub(crate) fn fresh(&self) {
        for (at, bytes) in &self.mapped.writable {
            let to = self.mapped.region.base() + at;
            // SAFETY: a writable section of the mapping, its own length; no image code runs
            // (the machine boots).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), to as *mut u8, bytes.len()) };
        }
        if self.slot == BUS {
            pool::forget();
        }
    }

    /// The DriverName of the globals it was bound to (the service's name).
    pub(crate) fn driver_name(&self) -> String {
        self.globals
            .DriverName
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| char::from(*c as u8))
            .collect()
    }

    /// Whether `at` is inside this image's mapping (its code or its data).
    pub(crate) fn contains(&self, at: usize) -> bool {
        self.mapped.region.contains(at)
    }

    pub(crate) fn in_text(&self, at: usize) -> bool {
        self.mapped
            .code
            .iter()
            .any(|&(from, to)| at >= from && at < to)
    }
}

/// Calls the image's function at `target` with `args`, on the calling processor's stack
/// (below the image's frames when the image is inside a DDI that called back).
///
/// # Safety
/// `target` is the image's function taking `args` (Windows x64 convention).
pub(crate) unsafe fn call(target: usize, args: &[u64]) -> u64 {
    let below = switch::guest_sp();
    if below != 0 {
        // SAFETY: the caller's contract; below the image's live frames is free stack.
        return unsafe { switch::enter(target, below, args) };
    }
    let top = stacks::begin();
    // SAFETY: the caller's contract; `top` is the processor's fresh stack.
    let r = unsafe { switch::enter(target, top, args) };
    stacks::end();
    r
}

/// The address the model's System V function for `dll!name` has, if the model gives it to
/// the image in `slot`. The pool is the bus's image's alone (one pool, counted as its
/// footprint): another image that imports a pool function is refused at load, not charged
/// to the bus.
fn resolve(dll: &str, name: &str, slot: usize) -> Option<usize> {
    let dll = dll.to_ascii_lowercase();
    match dll.as_str() {
        "wdfldr.sys" => match name {
            "WdfVersionBind" => Some(wdf_version_bind as *const () as usize),
            "WdfVersionUnbind" => Some(wdf_version_unbind as *const () as usize),
            _ => None,
        },
        "ntoskrnl.exe" => super::wdm::exports()
            .iter()
            .chain(
                pool::exports()
                    .iter()
                    .filter(|(n, _)| slot == BUS || !n.starts_with("Ex")),
            )
            .chain(super::etw::exports().iter())
            .find(|(n, _)| *n == name)
            .map(|(_, a)| *a),
        _ => None,
    }
}

/// The 458 entries of KMDF 1.33's table: a stub for each the model gives.
fn function_table(unmodelled: usize) -> Vec<usize> {
    let count = _WDFFUNCENUM::WdfFunctionTableNumEntries as usize;
    let mut table: Vec<usize> = (0..count).map(|i| unmodelled + i).collect();
    for (index, f) in super::entries::entries() {
        if let Some(f) = f {
            table[index as usize] = stub(f as *const () as usize);
        }
    }
    table
}

/// fxldr.h's WDF_BIND_INFO, as the image's FxDriverEntry hands it.
#[repr(C)]
struct BindInfo {
    size: u32,
    component: *const u16,
    major: u32,
    minor: u32,
    build: u32,
    func_count: u32,
    func_table: *mut *const usize,
    module: *mut core::ffi::c_void,
}
const _: () = assert!(core::mem::size_of::<BindInfo>() == 48);
const _: () = assert!(core::mem::offset_of!(BindInfo, func_table) == 32);

/// WDFLDR's WdfVersionBind: the library the image asks for, checked, and the table and
/// globals handed to it.
extern "C" fn wdf_version_bind(
    _driver: PDRIVER_OBJECT,
    _registry: PUNICODE_STRING,
    info: *mut BindInfo,
    globals: *mut PWDF_DRIVER_GLOBALS,
) -> NTSTATUS {
    const DDI: &str = "WdfVersionBind";
    let _kernel = super::enter(DDI, super::PASSIVE);
    // The image binding is the one whose data holds the globals pointer it hands in (its own
    // `WdfDriverGlobals`): two images bind, each to globals of its own.
    let Some(image) = loaded().find(|i| i.contains(globals as usize)) else {
        super::violation(
            super::Rule::Expectation,
            DDI,
            "the globals' out-pointer is in no loaded image",
        )
    };
    // SAFETY: the image's bind info, or NULL.
    let Some(info) = (unsafe { info.as_mut() }) else {
        super::violation(super::Rule::NullParameter, DDI, "BindInfo is NULL")
    };
    if info.size as usize != core::mem::size_of::<BindInfo>()
        || info.major != 1
        || info.minor > 33
        || info.func_count as usize != image.table.len()
        || info.func_table.is_null()
        || globals.is_null()
    {
        super::violation(
            super::Rule::Expectation,
            DDI,
            &format!(
                "a bind info the loader refuses: size {}, KMDF {}.{}, {} functions",
                info.size, info.major, info.minor, info.func_count
            ),
        );
    }
    // SAFETY: the image's pointer, checked non-NULL, to its own table pointer.
    unsafe { *info.func_table = image.table.as_ptr() };
    // SAFETY: the image's pointer, checked non-NULL, to its own globals pointer.
    unsafe { *globals = (&*image.globals as *const WDF_DRIVER_GLOBALS).cast_mut() };
    STATUS_SUCCESS
}

extern "C" fn wdf_version_unbind(
    _registry: PUNICODE_STRING,
    _info: *mut BindInfo,
    _globals: PWDF_DRIVER_GLOBALS,
) -> NTSTATUS {
    let _kernel = super::enter("WdfVersionUnbind", super::PASSIVE);
    STATUS_SUCCESS
}

#[cfg(test)]
fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
