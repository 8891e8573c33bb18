//! The driver the model runs, and how the model calls into it. Two ways to hand the model a
//! driver: the Linux build of the layer, linked into this test binary (its entry and its
//! callbacks are functions of this process, called as any Rust function), or the image that
//! linkcheck links, loaded as Windows loads it ([`super::image`]): its entry is an address,
//! its callbacks are the addresses it registered, each called with the Windows x64 calling
//! convention on a stack of the kernel's size.
//!
//! Every call from the model into the driver goes through [`DriverFn::run`]; every function
//! of the model's that the driver is handed (the bus interface's, a child's event callback)
//! through [`callable`].

use std::sync::atomic::{AtomicBool, Ordering};

use super::image;

static IMAGE: AtomicBool = AtomicBool::new(false);

/// Whether the driver is the loaded image (one driver per scenario process).
pub(crate) fn is_image() -> bool {
    IMAGE.load(Ordering::Relaxed)
}

pub(crate) fn set_image() {
    IMAGE.store(true, Ordering::Relaxed);
}

/// Whether the driver's heap is Rust's (the Linux build, counted by the test's allocator
/// while driver code runs); the image's is the pool the model gives (`image::pool`).
pub(crate) fn heap_is_counted() -> bool {
    !is_image()
}

/// A value that travels in one general-purpose register in both calling conventions: every
/// argument and result of a callback the model calls (handles, pointers, integers). Its
/// conversion to the register is the value's, zero- or sign-extended as the type is.
pub(crate) trait Reg: Copy {
    fn to_reg(self) -> u64;
    fn from_reg(r: u64) -> Self;
}

impl<T> Reg for *mut T {
    fn to_reg(self) -> u64 {
        self as usize as u64
    }
    fn from_reg(r: u64) -> Self {
        r as usize as *mut T
    }
}

impl<T> Reg for *const T {
    fn to_reg(self) -> u64 {
        self as usize as u64
    }
    fn from_reg(r: u64) -> Self {
        r as usize as *const T
    }
}

macro_rules! reg_int {
    ($($t:ty),*) => {$(
        impl Reg for $t {
            fn to_reg(self) -> u64 {
                self as u64
            }
            fn from_reg(r: u64) -> Self {
                // The callee sets only the low bits of its type (both conventions).
                r as $t
            }
        }
    )*};
}
reg_int!(u8, u16, u32, u64, usize, i8, i16, i32, i64);

impl Reg for () {
    fn to_reg(self) -> u64 {
        0
    }
    fn from_reg(_: u64) -> Self {}
}

/// A function of the driver's, called with its arguments as a tuple.
pub(crate) trait DriverFn<A> {
    type Out;
    /// Calls it: directly when the driver is the Linux build, on the image's stack with the
    /// Windows calling convention when it is the image.
    ///
    /// # Safety
    /// The caller's, as for calling the function itself: the driver's function, with
    /// arguments its contract allows.
    unsafe fn run(self, args: A) -> Self::Out;
}

macro_rules! driver_fn {
    ($($a:ident),*) => {
        impl<R: Reg, $($a: Reg),*> DriverFn<($($a,)*)> for unsafe extern "C" fn($($a),*) -> R {
            type Out = R;
            #[allow(non_snake_case)]
            unsafe fn run(self, ($($a,)*): ($($a,)*)) -> R {
                if is_image() {
                    let args = [$($a.to_reg()),*];
                    // SAFETY: the caller's contract; the address is the image's function.
                    R::from_reg(unsafe { image::call(self as usize, &args) })
                } else {
                    // SAFETY: the caller's contract.
                    unsafe { self($($a),*) }
                }
            }
        }
    };
}
driver_fn!();
driver_fn!(A0);
driver_fn!(A0, A1);
driver_fn!(A0, A1, A2);
driver_fn!(A0, A1, A2, A3);
driver_fn!(A0, A1, A2, A3, A4);
driver_fn!(A0, A1, A2, A3, A4, A5);

/// A function of the model's that the driver will call: itself for the Linux build; for the
/// image, the address of a stub that takes the Windows convention's arguments to it on the
/// host's stack (`image::stub`). The type stays the Rust one: only the driver calls it.
pub(crate) fn callable<F: Copy>(f: F) -> F {
    if !is_image() {
        return f;
    }
    assert_eq!(
        core::mem::size_of::<F>(),
        core::mem::size_of::<usize>(),
        "a function pointer"
    );
    // SAFETY: F is a function pointer (checked: one word), read as its address.
    let address: usize = unsafe { core::mem::transmute_copy(&f) };
    if address == 0 {
        return f;
    }
    let stub = image::stub(address);
    // SAFETY: the stub's address as the same function-pointer type; the model never calls it
    // itself (only the image does, with the convention the stub takes).
    unsafe { core::mem::transmute_copy(&stub) }
}
