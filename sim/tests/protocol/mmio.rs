//! `MmioHca` step by step on the fake register file: the mlx4 sequence on a device that
//! behaves, and every bounded wait proved bounded on one that does not.

use std::vec::Vec;

use hcabus::hca::{Hca, HwError, Identity, Readiness};
use hcabus::mmio::*;
use hcabus::time::Instant;
use hcabus_sim::fake_connectx::{FakeConnectX, FakeFaults};

fn identity() -> Identity {
    Identity {
        node_guid: 0x0002_c903_00ab_cdef,
        vendor_id: 0x15B3,
        device_id: 0x1003,
        subsys_vendor_id: 0x15B3,
        subsys_id: 0x0050,
        serial: 0x1122_3344_5566_7788,
        fw_version: Identity::fw_version(2, 42, 5000),
    }
}

fn device(faults: FakeFaults) -> MmioHca<FakeConnectX> {
    MmioHca::new(FakeConnectX::with_faults(identity(), faults))
}

fn at(hca: &mut MmioHca<FakeConnectX>, ms: u64) {
    hca.regs_mut().set_now(Instant::from_ms(ms));
}

#[test]
fn identity_is_read_from_config_space_the_serial_capability_and_bar0() {
    let mut hca = device(FakeFaults::default());
    assert_eq!(hca.identity(), Ok(identity()));
}

/// What `save_config` kept is the config space as it read it (the words it skips, 0):
/// the diagnostic bundle carries it.
#[test]
fn the_saved_config_space_is_what_save_config_read() {
    let mut hca = device(FakeFaults::default());
    let mut out = [0u8; 256];
    assert_eq!(hca.saved_config(&mut out), 0, "nothing saved yet");
    let before: Vec<u32> = (0..64).map(|i| hca.regs().config_word(i)).collect();
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.saved_config(&mut out), 256);
    for (i, word) in before.iter().enumerate() {
        let expect = if regs::SKIPPED_DWORDS.contains(&i) {
            0
        } else {
            *word
        };
        assert_eq!(out[i * 4..i * 4 + 4], expect.to_le_bytes(), "dword {i}");
    }
    assert_eq!(out[..2], 0x15B3u16.to_le_bytes(), "the vendor id first");
    let mut short = [0u8; 10];
    assert_eq!(hca.saved_config(&mut short), 8, "the whole dwords that fit");
}

#[test]
fn a_behaving_device_goes_through_the_mlx4_sequence_and_comes_back_as_it_was() {
    let mut hca = device(FakeFaults::default());
    let before: Vec<u32> = (0..16).map(|i| hca.regs().config_word(i)).collect();
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.assert_reset(), Ok(()));
    assert_eq!(hca.regs().resets_asserted, 1);
    assert_eq!(hca.settle_after_reset(), SOFT_RESET_SETTLE);
    // Within the settle and while the device is away, the vendor id reads 0xffff.
    at(&mut hca, 10);
    assert_eq!(hca.probe_ready(), Ok(Readiness::NotReady));
    assert!(
        hca.regs().touched_while_settling > 0,
        "the fake sees an early probe"
    );
    at(&mut hca, 1_000);
    assert_eq!(hca.probe_ready(), Ok(Readiness::Ready));
    // Back at power-on: no memory decoding until the restore.
    assert_eq!(hca.regs().config_word(1) & 0x2, 0);
    let writes_before = hca.regs().config_writes.len();
    assert_eq!(hca.restore_config(), Ok(()));
    let writes = &hca.regs().config_writes[writes_before..];
    let cap = 0x60u16;
    assert_eq!(writes[0].0, cap + regs::PCIE_DEVCTL, "Device Control first");
    assert_eq!(writes[1].0, cap + regs::PCIE_LNKCTL, "then Link Control");
    assert_eq!(
        writes.last().map(|w| w.0),
        Some(regs::CFG_COMMAND),
        "COMMAND last"
    );
    assert!(
        writes.iter().all(|(o, _)| *o != 22 * 4 && *o != 23 * 4),
        "dwords 22 and 23 are never written"
    );
    let after: Vec<u32> = (0..16).map(|i| hca.regs().config_word(i)).collect();
    assert_eq!(after, before, "the header is what was saved");
    assert_eq!(hca.init_command_interface(), Ok(()));
    assert_eq!(hca.identity(), Ok(identity()));
}

#[test]
fn a_semaphore_never_released_fails_the_assert_after_a_bounded_number_of_reads() {
    let mut hca = device(FakeFaults {
        semaphore_stuck: true,
        ..FakeFaults::default()
    });
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.assert_reset(), Err(HwError::Timeout));
    assert_eq!(hca.regs().semaphore_reads, SEMAPHORE_TRIES);
    assert_eq!(
        hca.regs().resets_asserted,
        0,
        "no reset without the semaphore"
    );
}

#[test]
fn a_device_that_never_returns_stays_not_ready_and_each_probe_is_one_read() {
    let mut hca = device(FakeFaults {
        never_returns: true,
        ..FakeFaults::default()
    });
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.assert_reset(), Ok(()));
    // The bound of the wait is the coordinator's hw_ready_timeout (tests/tests/mmio.rs):
    // here, that one probe never spins.
    for ms in [1_000, 5_000, 60_000] {
        at(&mut hca, ms);
        assert_eq!(hca.probe_ready(), Ok(Readiness::NotReady));
    }
}

#[test]
fn a_command_that_never_completes_times_out_after_a_bounded_number_of_reads() {
    let mut hca = device(FakeFaults {
        command_stuck: true,
        ..FakeFaults::default()
    });
    assert_eq!(hca.init_command_interface(), Err(HwError::Timeout));
    assert_eq!(hca.regs().command_reads, COMMAND_TRIES);
}

#[test]
fn another_adapter_after_the_reset_shows_in_its_identity() {
    let mut hca = device(FakeFaults {
        guid_after_reset: Some(0xBAD),
        ..FakeFaults::default()
    });
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.assert_reset(), Ok(()));
    at(&mut hca, 1_000);
    assert_eq!(hca.probe_ready(), Ok(Readiness::Ready));
    assert_eq!(hca.restore_config(), Ok(()));
    let found = hca.identity().expect("identity");
    assert_eq!(found.node_guid, 0xBAD);
    assert!(!found.same_adapter(&identity()));
}

#[test]
fn the_catastrophic_buffer_and_the_health_counter_are_read() {
    let mut hca = device(FakeFaults {
        catastrophic: 0x0000_0301,
        ..FakeFaults::default()
    });
    let first = hca.read_health().expect("health");
    assert_eq!(first.catastrophic, 0x301);
    at(&mut hca, 1_000);
    let later = hca.read_health().expect("health");
    assert!(later.counter > first.counter, "the counter advances");
}

#[test]
fn a_function_level_reset_goes_through_the_pcie_capability_when_there_is_one() {
    let mut hca = device(FakeFaults::default());
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.function_level_reset(), Ok(()));
    assert_eq!(hca.regs().flrs, 1);
    assert_eq!(hca.settle_after_reset(), FLR_SETTLE);

    let mut without = device(FakeFaults {
        no_flr: true,
        ..FakeFaults::default()
    });
    assert_eq!(without.save_config(), Ok(()));
    assert_eq!(without.function_level_reset(), Err(HwError::Unsupported));
    assert_eq!(without.regs().flrs, 0);
}

#[test]
fn a_device_off_the_bus_is_absent() {
    let mut hca = device(FakeFaults {
        never_returns: true,
        ..FakeFaults::default()
    });
    assert_eq!(hca.save_config(), Ok(()));
    assert_eq!(hca.assert_reset(), Ok(()));
    at(&mut hca, 2_000);
    assert_eq!(hca.save_config(), Err(HwError::Absent));
    assert_eq!(hca.read_health(), Err(HwError::Absent));
}

/// The device through a whole reset (assert, the device back, restore, init), at `ms`.
fn reset_cycle(hca: &mut MmioHca<FakeConnectX>, ms: u64) -> Result<(), HwError> {
    hca.save_config()?;
    hca.assert_reset()?;
    at(hca, ms);
    if hca.probe_ready()? != Readiness::Ready {
        return Err(HwError::Timeout);
    }
    hca.restore_config()?;
    hca.init_command_interface()
}

/// The register file speaks the run's fault vocabulary: each fault it models reads through
/// `MmioHca` as the coordinator must see it (the same effect as on the simulated HCA), and it
/// says so for every fault it does not model, leaving the device as it was.
#[test]
fn each_fault_the_register_file_models_reads_as_that_fault_through_mmio() {
    use hcabus_sim::fault::{Fault, CATASTROPHIC_WORD};
    for f in Fault::ALL {
        let mut hca = device(FakeFaults::default());
        at(&mut hca, 1_000);
        let modelled = hca.regs_mut().inject(f);
        let first = hca.read_health().expect("readable");
        at(&mut hca, 5_000);
        let later = hca.read_health().expect("readable");
        let stalled = first.counter == later.counter;
        let name = f.name();
        match f {
            Fault::Catastrophic => {
                assert!(modelled, "{name}");
                assert_eq!(later.catastrophic, CATASTROPHIC_WORD, "{name}");
                assert_eq!(reset_cycle(&mut hca, 10_000), Ok(()), "{name}");
                assert_eq!(hca.read_health().map(|h| h.catastrophic), Ok(0), "cleared");
            }
            Fault::HealthStall | Fault::Hang => {
                assert!(modelled && stalled, "{name}: the counter stops");
                let commands = hca.init_command_interface();
                let hang = f == Fault::Hang;
                assert_eq!(commands.is_err(), hang, "{name}: commands {commands:?}");
            }
            Fault::CommandTimeout => {
                assert!(modelled && !stalled, "{name}");
                assert_eq!(hca.init_command_interface(), Err(HwError::Timeout));
            }
            Fault::NeverReturns => {
                assert!(modelled, "{name}");
                assert_eq!(reset_cycle(&mut hca, 60_000), Err(HwError::Timeout));
            }
            Fault::DeviceReplaced => {
                assert!(modelled, "{name}");
                assert_eq!(reset_cycle(&mut hca, 10_000), Ok(()), "{name}");
                let after = hca.identity().expect("identity");
                assert_ne!(after.node_guid, identity().node_guid, "{name}");
            }
            // The register file names the faults it does not model (`inject`'s own match
            // has no catch-all): one it starts to model fails the first assert here.
            _ => {
                assert!(!modelled, "{name} is not the register file's");
                assert_eq!((later.catastrophic, stalled), (0, false), "{name}");
                assert_eq!(reset_cycle(&mut hca, 10_000), Ok(()), "{name}");
                assert_eq!(hca.identity(), Ok(identity()), "{name}");
            }
        }
    }
}

/// The serial number is found wherever it sits in the extended capability list, and the
/// walk reads each header once: it stops at the end of the list, and at a pointer back to
/// its start, with no serial number (0).
#[test]
fn the_serial_number_is_found_by_walking_the_extended_capabilities_once() {
    use hcabus_sim::ExtCaps;
    // (layout, serial found, config reads past 0x100: headers, and the serial's two words)
    for (ext_caps, serial, reads) in [
        (ExtCaps::SerialOnly, identity().serial, 3),
        (ExtCaps::ErrorsThenSerial, identity().serial, 4),
        (ExtCaps::ErrorsOnly, 0, 1),
        (ExtCaps::ErrorsLoop, 0, 1),
    ] {
        let mut hca = device(FakeFaults {
            ext_caps,
            ..FakeFaults::default()
        });
        let found = hca.identity().expect("identity");
        assert_eq!(found.serial, serial, "{ext_caps:?}");
        assert_eq!(hca.regs().ext_reads, reads, "{ext_caps:?}");
        assert_eq!(found.node_guid, identity().node_guid, "{ext_caps:?}");
    }
}

/// Device and Link Control come back as the driver had tuned them, not at their
/// power-on values, and without the FLR bit.
#[test]
fn the_restore_brings_back_device_and_link_control_as_they_were() {
    let cap = 0x60u16;
    let (devctl, lnkctl) = (
        usize::from((cap + regs::PCIE_DEVCTL) / 4),
        usize::from((cap + regs::PCIE_LNKCTL) / 4),
    );
    let mut hca = device(FakeFaults::default());
    let before = (
        hca.regs().config_word(devctl),
        hca.regs().config_word(lnkctl),
    );
    assert_eq!(reset_cycle(&mut hca, 1_000), Ok(()));
    let after = (
        hca.regs().config_word(devctl),
        hca.regs().config_word(lnkctl),
    );
    assert_eq!(after, before);
    assert_eq!(hca.regs().flrs, 0, "the restore sets no FLR bit");
    // A device that came back without a restore is at its power-on values: the test
    // tells the two apart.
    let mut bare = device(FakeFaults::default());
    bare.save_config().expect("save");
    bare.assert_reset().expect("assert");
    at(&mut bare, 1_000);
    assert_eq!(bare.probe_ready(), Ok(Readiness::Ready));
    assert_ne!(bare.regs().config_word(devctl), before.0);
    assert_ne!(bare.regs().config_word(lnkctl), before.1);
}

/// A function-level reset writes Device Control as it was, with the FLR bit added.
#[test]
fn a_function_level_reset_keeps_device_control_and_adds_the_flr_bit() {
    let cap = 0x60u16;
    let mut hca = device(FakeFaults::default());
    let devctl = hca
        .regs()
        .config_word(usize::from((cap + regs::PCIE_DEVCTL) / 4));
    hca.save_config().expect("save");
    assert_eq!(hca.function_level_reset(), Ok(()));
    assert_eq!(
        hca.regs().config_writes.last(),
        Some(&(cap + regs::PCIE_DEVCTL, devctl | regs::DEVCTL_BCR_FLR))
    );
}

/// A command the device completes with a non-zero status failed.
#[test]
fn a_command_completed_with_an_error_status_is_a_device_error() {
    let mut hca = device(FakeFaults {
        command_status: 0x05,
        ..FakeFaults::default()
    });
    assert_eq!(hca.init_command_interface(), Err(HwError::DeviceError));
}

/// No command goes to firmware that is still initialising: the wait for it is bounded.
#[test]
fn firmware_that_never_finishes_initialising_gets_no_command() {
    let mut hca = device(FakeFaults {
        stuck_initializing: true,
        ..FakeFaults::default()
    });
    assert_eq!(hca.init_command_interface(), Err(HwError::Timeout));
    assert_eq!(hca.regs().initializing_reads, INIT_TRIES);
    assert_eq!(hca.regs().command_reads, 0, "no command was sent");
}

/// The catastrophic buffer is read whole: an error in a later syndrome word alone is an
/// error, and the first non-zero word is the one reported.
#[test]
fn an_error_in_any_syndrome_word_is_found() {
    for (i, tail) in [[0, 0x0BAD, 0x0C0DE], [0x0F00, 0, 0], [0, 0, 7]]
        .into_iter()
        .enumerate()
    {
        let mut hca = device(FakeFaults {
            syndrome_tail: tail,
            ..FakeFaults::default()
        });
        let first = tail.into_iter().find(|w| *w != 0).expect("an error");
        let health = hca.read_health().expect("readable");
        assert_eq!(health.catastrophic, first, "case {i}");
    }
}

/// Absent means every word reads all-ones: a health counter at all-ones alone, or a
/// catastrophic buffer of all-ones beside a live counter, is a device still there.
#[test]
fn only_all_ones_everywhere_is_a_device_gone() {
    let mut counter = device(FakeFaults {
        counter_stuck_at: Some(u32::MAX),
        ..FakeFaults::default()
    });
    let h = counter.read_health().expect("present");
    assert_eq!((h.catastrophic, h.counter), (0, u32::MAX));
    let mut buffer = device(FakeFaults {
        catastrophic: u32::MAX,
        syndrome_tail: [u32::MAX; 3],
        ..FakeFaults::default()
    });
    let h = buffer.read_health().expect("present");
    assert_eq!(h.catastrophic, u32::MAX);
    let mut gone = device(FakeFaults {
        catastrophic: u32::MAX,
        syndrome_tail: [u32::MAX; 3],
        counter_stuck_at: Some(u32::MAX),
        ..FakeFaults::default()
    });
    assert_eq!(gone.read_health(), Err(HwError::Absent));
}
