//! The verifier's IRQL model: raising nests, blocking is refused at DISPATCH_LEVEL, and the
//! level is per thread.

use hcabus::host::irql::*;

#[test]
fn raising_and_lowering_nests() {
    assert_eq!(current(), Irql::Passive);
    assert!(check_may_block("test wait").is_ok());
    {
        let _outer = raise_to_dispatch();
        assert_eq!(current(), Irql::Dispatch);
        {
            let _inner = raise_to_dispatch();
        }
        assert_eq!(current(), Irql::Dispatch, "inner guard restores DISPATCH");
        let before = block_violations();
        assert_eq!(
            check_may_block("test wait"),
            Err(BlockAtDispatch { what: "test wait" })
        );
        assert!(block_violations() > before);
    }
    assert_eq!(current(), Irql::Passive);
}

#[test]
fn irql_is_per_thread() {
    let _raised = raise_to_dispatch();
    let other = std::thread::spawn(current).join().expect("thread");
    assert_eq!(other, Irql::Passive);
}
