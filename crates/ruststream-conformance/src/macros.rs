//! `conformance_tests!`: one test per check for a harness.

/// Expands into one `#[test]` per check of [`checks`](crate::checks), each running the
/// check on a new value of the harness expression.
///
/// ```ignore
/// conformance_tests!(MyHarness::new());
/// ```
///
/// A check that fails because of a bug in the adapter stays, ignored with the reason
/// (a name that is not a check does not compile):
///
/// ```ignore
/// conformance_tests!(
///     MyHarness::new(),
///     ignore(fail_fast_redelivers = "adapter bug: the delivery is lost on a stop"),
/// );
/// ```
///
/// Put each instantiation in a module of its own (the tests are named after the checks).
#[macro_export]
macro_rules! conformance_tests {
    ($harness:expr $(, ignore($($check:ident = $reason:literal),* $(,)?))? $(,)?) => {
        $($(
            #[allow(unused_imports)]
            use $crate::checks::$check as _;
        )*)?
        $crate::__conformance_tests!(
            $harness;
            [$($($check = $reason),*)?];
            declared_capabilities,
            roundtrip,
            ack_removes,
            drop_not_redelivered,
            retry_attempts_then_dead_letter,
            retry_after_delays,
            decode_failure_drops,
            panic_skip_acks,
            fail_fast_redelivers,
            graceful_stop,
            publish_from_handler,
            request_reply,
            failed_copy_is_owed,
            retry_after_beyond_native_bound,
            delivered_twice_handled_once,
            stop_spends_no_attempt,
            stop_during_delay,
            forged_retry_count,
            one_copy_after_a_kill,
            key_order_through_retries,
        );
    };
}

/// One test per check named; not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($harness:expr; $ignored:tt; $($name:ident),* $(,)?) => {
        $($crate::__conformance_test!($name, $harness; $ignored);)*
    };
}

/// The test of one check, ignored if the list names it; not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_test {
    ($name:ident, $harness:expr; []) => {
        #[test]
        fn $name() {
            $crate::__private::this_test(module_path!(), stringify!($name));
            let harness = $harness;
            let label = $crate::Harness::name(&harness).to_owned();
            $crate::__private::run(stringify!($name), &label, async move {
                $crate::checks::$name(&harness).await;
            });
        }
    };
    ($name:ident, $harness:expr; [$check:ident = $reason:literal $(, $more:ident = $why:literal)*]) => {
        $crate::__if_same!($name, $check, {
            #[test]
            #[ignore = $reason]
            fn $name() {
                let harness = $harness;
                let label = $crate::Harness::name(&harness).to_owned();
                $crate::__private::run(stringify!($name), &label, async move {
                    $crate::checks::$name(&harness).await;
                });
            }
        }, {
            $crate::__conformance_test!($name, $harness; [$($more = $why),*]);
        });
    };
}

/// Expands to the first block if the two identifiers are the same, else to the second;
/// not part of the API.
#[doc(hidden)]
#[macro_export]
macro_rules! __if_same {
    ($a:ident, $b:ident, {$($same:tt)*}, {$($other:tt)*}) => {
        macro_rules! __conformance_same {
            ($a) => { $($same)* };
            ($__conformance_any:ident) => { $($other)* };
        }
        __conformance_same!($b);
    };
}
