//! The layer's atomics. On Windows, the core's. Under the KMDF model (`--cfg wdk_fake`, the
//! crate `hcabus-kmdf-model`) each access is also a point where another processor may run,
//! before the access takes effect: the model defines `hcabus_model_point`, as it defines the
//! kernel's exports the layer calls. Without these the model switched processors only at DDI
//! calls, and ran the layer's code between two DDIs as one step: a race between two of its
//! accesses to shared memory (a failed rundown acquire, then the loads of `removed` and
//! `stopped`: issue 61's D1) was one no schedule could take.

#[cfg(not(wdk_fake))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};

#[cfg(wdk_fake)]
pub(crate) use hooked::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};

#[cfg(wdk_fake)]
mod hooked {
    use core::sync::atomic::Ordering;

    extern "C" {
        /// The model's scheduling point (`hcabus-kmdf-model`, kmdf/schedule.rs).
        fn hcabus_model_point();
    }

    fn point() {
        // SAFETY: the model defines it; it takes nothing and may switch to another of its
        // processors, which it returns from.
        unsafe { hcabus_model_point() }
    }

    macro_rules! shared {
        ($name:ident, $inner:ty, $value:ty $(, $int:ident)?) => {
            /// The core's atomic of the same name, with a scheduling point at each access.
            #[derive(Debug)]
            pub(crate) struct $name($inner);

            #[allow(dead_code)]
            impl $name {
                pub(crate) const fn new(v: $value) -> Self {
                    Self(<$inner>::new(v))
                }

                pub(crate) fn load(&self, order: Ordering) -> $value {
                    point();
                    self.0.load(order)
                }

                pub(crate) fn store(&self, v: $value, order: Ordering) {
                    point();
                    self.0.store(v, order);
                }

                pub(crate) fn swap(&self, v: $value, order: Ordering) -> $value {
                    point();
                    self.0.swap(v, order)
                }

                pub(crate) fn compare_exchange_weak(
                    &self,
                    current: $value,
                    new: $value,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$value, $value> {
                    point();
                    self.0.compare_exchange_weak(current, new, success, failure)
                }

                pub(crate) fn fetch_update(
                    &self,
                    set: Ordering,
                    fetch: Ordering,
                    f: impl FnMut($value) -> Option<$value>,
                ) -> Result<$value, $value> {
                    point();
                    self.0.fetch_update(set, fetch, f)
                }
            }

            $(shared!(@$int $name, $value);)?
        };
        (@int $name:ident, $value:ty) => {
            #[allow(dead_code)]
            impl $name {
                pub(crate) fn fetch_add(&self, v: $value, order: Ordering) -> $value {
                    point();
                    self.0.fetch_add(v, order)
                }

                pub(crate) fn fetch_and(&self, v: $value, order: Ordering) -> $value {
                    point();
                    self.0.fetch_and(v, order)
                }
            }
        };
    }

    shared!(AtomicBool, core::sync::atomic::AtomicBool, bool);
    shared!(AtomicU32, core::sync::atomic::AtomicU32, u32, int);
    shared!(AtomicU64, core::sync::atomic::AtomicU64, u64, int);

    /// The core's AtomicPtr, with a scheduling point at each access.
    #[derive(Debug)]
    pub(crate) struct AtomicPtr<T>(core::sync::atomic::AtomicPtr<T>);

    impl<T> AtomicPtr<T> {
        pub(crate) const fn new(p: *mut T) -> Self {
            Self(core::sync::atomic::AtomicPtr::new(p))
        }

        pub(crate) fn load(&self, order: Ordering) -> *mut T {
            point();
            self.0.load(order)
        }

        pub(crate) fn store(&self, p: *mut T, order: Ordering) {
            point();
            self.0.store(p, order);
        }

        pub(crate) fn swap(&self, p: *mut T, order: Ordering) -> *mut T {
            point();
            self.0.swap(p, order)
        }
    }
}
