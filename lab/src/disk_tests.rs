//! The product's disk driven on lab-built hosts: on its own adapter ([`single`]) and as a
//! path of a multipath disk ([`paths`]). The rules are the product's; the hosts, the
//! targets and the workloads that exercise them are the lab's.

mod paths;
mod single;
