//! What a user sees when a function is not a handler: the framework's own message with
//! the rules a handler follows, and no internal type offered as the fix. The expected
//! compiler output is in `tests/ui/*.stderr` (`TRYBUILD=overwrite` writes it anew).

#[test]
fn functions_that_are_not_handlers_get_the_frameworks_message() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
