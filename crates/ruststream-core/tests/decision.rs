//! Table tests of [`decide`] against the specification (SPEC.md §6, with the §2 and §4 tables).
//!
//! Every expected plan here is written from the specification's text, not from
//! `decision.rs`; each group of rows cites the sentence it comes from. Where the
//! specification leaves a choice, the choice documented in `decision.rs` and
//! `settlement.rs` is followed: "remove the original" is [`Settlement::Remove`] for an
//! immediate copy and [`Settlement::Reject`] for a delayed one (the seeds name `rejected`
//! for AMQP's `retry_after`; on Redis both are `XACK` / `LREM`); a broker
//! that dead-letters itself but has no delayed redelivery holds, then requeues; retry
//! copies go to the declared retry address, else the subscription's own address.

use std::num::NonZeroU32;
use std::time::Duration;

use ruststream_core::Verdict::{self, Ack, Drop, Retry};
use ruststream_core::{
    Address, Capabilities, Declaration, Facts, Original, Plan, Republish, Settlement, decide,
};

const D: Duration = Duration::from_secs(5);
const AFTER: Verdict = Verdict::RetryAfter(D);
const CAP: u32 = 3;
const OWN: &str = "orders";
const RETRY_TO: &str = "orders.retry";
const DEAD: &str = "orders.dead";

const VERDICTS: &[Verdict] = &[Ack, Drop, Retry, AFTER];
const RETRIES: &[Verdict] = &[Retry, AFTER];

/// A kind of form: its capabilities, and whether *this delivery* carries the broker's count.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Form(&'static str, Capabilities, bool);

// Capability flags: settles, requeues, counts, delays (of its own), dead-letters itself;
// CNT_D: this delivery carries the broker's count (with CNT).
const SET: u8 = 1;
const REQ: u8 = 2;
const CNT: u8 = 4;
const DLY: u8 = 8;
const SDL: u8 = 16;
const CNT_D: u8 = 32;

const fn form(name: &'static str, f: u8) -> Form {
    let caps = Capabilities {
        settles: f & SET != 0,
        requeues: f & REQ != 0,
        counts: f & CNT != 0,
        delays: if f & DLY != 0 {
            Some(Capabilities::ANY_DELAY)
        } else {
            None
        },
        dead_letters: f & SDL != 0,
        moves: false,
    };
    Form(name, caps, f & CNT_D != 0)
}

const STREAM: Form = form("Redis stream / reliable list", SET);
const ZSET: Form = form("Redis stream, DurableZset", SET | DLY);
const AMQP: Form = form("AMQP at-least-once, header", SET | REQ | CNT | CNT_D);
const AMQP_COPY: Form = form("AMQP at-least-once, a copy", SET | REQ | CNT);
const CLAIM: Form = form("Redis claiming", SET | REQ | CNT | DLY | CNT_D);
const QUORUM: Form = form("self-DL, no delay", SET | REQ | CNT | SDL | CNT_D);
const JET: Form = form("self-DL, delays", SET | REQ | CNT | DLY | SDL | CNT_D);
const AMO_HDR: Form = form("AMQP at-most-once, header", CNT | CNT_D);
const AMO: Form = form("AMQP at-most-once, no header", CNT);
const PUBSUB: Form = form("Redis Pub/Sub / plain list", 0);

const FORMS: &[Form] = &[
    STREAM, ZSET, AMQP, AMQP_COPY, CLAIM, QUORUM, JET, AMO_HDR, AMO, PUBSUB,
];
const SETTLING: &[Form] = &[STREAM, ZSET, AMQP, AMQP_COPY, CLAIM, QUORUM, JET];
const NOT_SETTLING: &[Form] = &[AMO_HDR, AMO, PUBSUB];
const SELF_DL: &[Form] = &[QUORUM, JET];
/// Settling forms whose broker does not dead-letter itself.
const SETTLING_OTHER: &[Form] = &[STREAM, ZSET, AMQP, AMQP_COPY, CLAIM];

/// What the mount declares (cap `N`, 0 = none; dead letter `L`) and the attempts tried.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Decl(&'static str, u32, bool, &'static [u32]);

const NOTHING: Decl = Decl("nothing declared", 0, false, &[1, 2, 9]);
const DL_ONLY: Decl = Decl("L without N", 0, true, &[1, 2, 9]);
const BELOW: Decl = Decl("below N", CAP, false, &[1, CAP - 1]);
const BELOW_DL: Decl = Decl("below N, L", CAP, true, &[1, CAP - 1]);
const AT: Decl = Decl("at N", CAP, false, &[CAP]);
const AT_DL: Decl = Decl("at N, L", CAP, true, &[CAP]);
const ABOVE: Decl = Decl("above N", CAP, false, &[CAP + 1, 9]);
const ABOVE_DL: Decl = Decl("above N, L", CAP, true, &[CAP + 1, 9]);

const DECLS: &[Decl] = &[
    NOTHING, DL_ONLY, BELOW, BELOW_DL, AT, AT_DL, ABOVE, ABOVE_DL,
];
const SPENT: &[Decl] = &[AT, ABOVE];
const SPENT_DL: &[Decl] = &[AT_DL, ABOVE_DL];
const RETRYABLE: &[Decl] = &[NOTHING, BELOW, BELOW_DL];

fn declaration(Decl(_, cap, dl, _): Decl, retry_to: bool) -> Declaration {
    Declaration {
        max_attempts: NonZeroU32::new(cap),
        dead_letter: dl.then(|| DEAD.into()),
        retry_to: retry_to.then(|| RETRY_TO.into()),
    }
}

/// The expected copy: none, the dead letter (as arrived), or a retry copy to `R` now / after `d`.
#[derive(Clone, Copy, Debug)]
enum C {
    No,
    Dl,
    R,
    RAfter,
}

// The expected original.
const ACCEPT: Original = Original::Settle(Settlement::Accept);
const REJECT: Original = Original::Settle(Settlement::Reject);
const REQUEUE: Original = Original::Settle(Settlement::Requeue);
const REQUEUE_AFTER: Original = Original::Settle(Settlement::RequeueAfter(D));
const REMOVE: Original = Original::Settle(Settlement::Remove);
const HOLD: Original = Original::Hold(D, Settlement::Requeue);
const UNSUPPORTED: Original = Original::Unsupported;
const UNTOUCHED: Original = Original::Untouched;

fn expected(c: C, o: Original, attempt: u32, retry_to: bool) -> Plan {
    let to = Address::new(if retry_to { RETRY_TO } else { OWN });
    let copy = match c {
        C::No => None,
        C::Dl => Some((DEAD.into(), None, None)),
        C::R => Some((to, Some(attempt), None)),
        C::RAfter => Some((to, Some(attempt), Some(D))),
    };
    let copy = copy.map(|(to, retry_count, delay)| Republish {
        to,
        retry_count,
        delay,
    });
    Plan { copy, original: o }
}

fn run(v: Verdict, Form(_, caps, counts): Form, d: Decl, attempt: u32, retry_to: bool) -> Plan {
    let (facts, own) = (Facts { attempt, counts }, Address::new(OWN));
    decide(v, facts, caps, &declaration(d, retry_to), &own)
}

type S<T> = &'static [T];
type Row = (S<Verdict>, S<Form>, S<Decl>, C, Original);

/// §6, row by row. Each cell (outcome × form × declaration) must match exactly one row.
#[rustfmt::skip]
const TABLE: &[Row] = &[
    // "ack | settles | accept"; "drop | settles | reject"; "ack, drop | does not settle |
    // AckError::Unsupported". §1: the cap is checked before any *retry*, so not here.
    (&[Ack], SETTLING, DECLS, C::No, ACCEPT),
    (&[Drop], SETTLING, DECLS, C::No, REJECT),
    (&[Ack, Drop], NOT_SETTLING, DECLS, C::No, UNSUPPORTED),

    // "retry, retry_after | broker dead-letters itself | the broker's own requeue (or delay);
    // it counts and moves the spent delivery itself" (no delay of its own: hold, then requeue).
    (&[Retry], SELF_DL, DECLS, C::No, REQUEUE),
    (&[AFTER], &[JET], DECLS, C::No, REQUEUE_AFTER),
    (&[AFTER], &[QUORUM], DECLS, C::No, HOLD),

    // "N declared, a ≥ N, broker does not dead-letter itself | with L: publish the delivery as
    // it arrived to L, then remove the original; without L: reject". A form that does not
    // settle cannot remove (the copy only) nor reject (AckError::Unsupported, as `drop`).
    (RETRIES, SETTLING_OTHER, SPENT_DL, C::Dl, REMOVE),
    (RETRIES, SETTLING_OTHER, SPENT, C::No, REJECT),
    (RETRIES, NOT_SETTLING, SPENT_DL, C::Dl, UNTOUCHED),
    (RETRIES, NOT_SETTLING, SPENT, C::No, UNSUPPORTED),

    // "L declared without N | publish as arrived to L, then remove the original".
    (RETRIES, SETTLING_OTHER, &[DL_ONLY], C::Dl, REMOVE),
    (RETRIES, NOT_SETTLING, &[DL_ONLY], C::Dl, UNTOUCHED),

    // "retry | nothing declared | requeues: the broker's own requeue; else if it settles: copy
    // to its own address (count + 1), then remove the original; else AckError::Unsupported".
    (&[Retry], &[AMQP, AMQP_COPY, CLAIM], &[NOTHING], C::No, REQUEUE),
    (&[Retry], &[STREAM, ZSET], &[NOTHING], C::R, REMOVE),
    (&[Retry], NOT_SETTLING, &[NOTHING], C::No, UNSUPPORTED),

    // "retry | declared, below the cap | counts: the broker's own requeue (AckError::Unsupported
    // where the form cannot requeue, as AMQP at-most-once); does not count: copy to R
    // (count + 1), then remove the original (a form that does not settle: the copy only)".
    (&[Retry], &[AMQP, CLAIM], &[BELOW, BELOW_DL], C::No, REQUEUE),
    (&[Retry], &[AMO_HDR], &[BELOW, BELOW_DL], C::No, UNSUPPORTED),
    (&[Retry], &[STREAM, ZSET, AMQP_COPY], &[BELOW, BELOW_DL], C::R, REMOVE),
    (&[Retry], &[AMO, PUBSUB], &[BELOW, BELOW_DL], C::R, UNTOUCHED),

    // "retry_after(d) | below the cap, or nothing declared | delays: the form's own delayed
    // redelivery; otherwise remove the original now and publish a copy to R after d (count + 1)".
    (&[AFTER], &[ZSET, CLAIM], RETRYABLE, C::No, REQUEUE_AFTER),
    (&[AFTER], &[STREAM, AMQP, AMQP_COPY], RETRYABLE, C::RAfter, REJECT),
    (&[AFTER], NOT_SETTLING, RETRYABLE, C::RAfter, UNTOUCHED),
];

#[test]
fn spec_table() {
    let mut used = [0; TABLE.len()];
    let (mut cells, mut failures) = (0, Vec::new());
    for &v in VERDICTS {
        for &f in FORMS {
            for &d in DECLS {
                let hits: Vec<usize> = (0..TABLE.len())
                    .filter(|&i| TABLE[i].0.contains(&v) && TABLE[i].1.contains(&f))
                    .filter(|&i| TABLE[i].2.contains(&d))
                    .collect();
                assert_eq!(hits.len(), 1, "{v:?} {f:?} {d:?} matches rows {hits:?}");
                let (i, (_, _, _, c, o)) = (hits[0], TABLE[hits[0]]);
                for retry_to in [false, true] {
                    for &a in d.3 {
                        (cells, used[i]) = (cells + 1, used[i] + 1);
                        let (want, got) = (expected(c, o, a, retry_to), run(v, f, d, a, retry_to));
                        if got != want {
                            failures.push(format!(
                                "row {i}: {v:?} / {} / {} / attempt {a} / retry_to {retry_to}: \
                                 expected {want:?}, got {got:?}",
                                f.0, d.0
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(used.iter().all(|&n| n > 0), "unused rows: {used:?}");
    let n = failures.len();
    assert!(
        n == 0,
        "{n} of {cells} cells disagree:\n{}",
        failures.join("\n")
    );
    // 4 verdicts × 10 forms × 16 (declaration, attempt) × with/without a retry address.
    assert_eq!(cells, 1280);
}

/// (outcome, form, declaration, copy, original): checked for every attempt of the declaration
/// and with and without a retry address.
fn check_small(table: &[(Verdict, Form, Decl, C, Original)]) {
    for &(v, f, d, c, o) in table {
        for retry_to in [false, true] {
            for &a in d.3 {
                let (want, got) = (expected(c, o, a, retry_to), run(v, f, d, a, retry_to));
                assert_eq!(
                    got, want,
                    "{v:?} {f:?} {d:?} attempt {a} retry_to {retry_to}"
                );
            }
        }
    }
}

#[test]
#[rustfmt::skip]
fn amqp_at_most_once_table() {
    // §2, `Settle::AtMostOnce`: "ack, drop | AckError::Unsupported"; "retry() |
    // AckError::Unsupported; with a declared cap, an immediate copy if the delivery has no
    // delivery-count"; "retry_after(d) | a copy published to the address after d".
    check_small(&[
        (Ack, AMO_HDR, NOTHING, C::No, UNSUPPORTED),
        (Ack, AMO, BELOW, C::No, UNSUPPORTED),
        (Drop, AMO_HDR, BELOW, C::No, UNSUPPORTED),
        (Drop, AMO, NOTHING, C::No, UNSUPPORTED),
        (Retry, AMO_HDR, NOTHING, C::No, UNSUPPORTED),
        (Retry, AMO, NOTHING, C::No, UNSUPPORTED),
        (Retry, AMO_HDR, BELOW, C::No, UNSUPPORTED),
        (Retry, AMO, BELOW, C::R, UNTOUCHED),
        (AFTER, AMO_HDR, NOTHING, C::RAfter, UNTOUCHED),
        (AFTER, AMO, NOTHING, C::RAfter, UNTOUCHED),
        (AFTER, AMO_HDR, BELOW_DL, C::RAfter, UNTOUCHED),
        (AFTER, AMO, BELOW, C::RAfter, UNTOUCHED),
    ]);
}

#[test]
#[rustfmt::skip]
fn amqp_at_least_once_table() {
    // §2: ack → accepted; retry() → modified (Requeue); retry_after(d) → `rejected`, and a
    // copy after d;
    // drop → rejected. "Below the cap retry() returns the message with modified"; "under a
    // declared cap retry() on a copy immediately publishes the next copy"; "At the cap the
    // delivery is published as it arrived to the dead-letter address. Without one the
    // delivery is rejected"; "A dead-letter address declared without a cap accepts every retry".
    check_small(&[
        (Ack, AMQP, NOTHING, C::No, ACCEPT),
        (Retry, AMQP, NOTHING, C::No, REQUEUE),
        (AFTER, AMQP, NOTHING, C::RAfter, REJECT),
        (Drop, AMQP, NOTHING, C::No, REJECT),
        (Retry, AMQP, BELOW, C::No, REQUEUE),
        (Retry, AMQP_COPY, BELOW, C::R, REMOVE),
        (AFTER, AMQP, BELOW_DL, C::RAfter, REJECT),
        (Retry, AMQP, AT_DL, C::Dl, REMOVE),
        (AFTER, AMQP_COPY, ABOVE_DL, C::Dl, REMOVE),
        (Retry, AMQP, AT, C::No, REJECT),
        (Retry, AMQP, DL_ONLY, C::Dl, REMOVE),
    ]);
}

#[test]
#[rustfmt::skip]
fn redis_table() {
    // §4 table. A reliable list has the stream's capabilities (`LPUSH` back, then `LREM`: a
    // copy to its own address, then the original removed); a plain list is Pub/Sub's.
    check_small(&[
        (Ack, STREAM, NOTHING, C::No, ACCEPT),       // XACK / LREM
        (Retry, STREAM, NOTHING, C::R, REMOVE),      // XADD copy, then XACK / LPUSH, LREM
        (Drop, STREAM, NOTHING, C::No, REJECT),      // XACK / LREM
        (Ack, CLAIM, NOTHING, C::No, ACCEPT),        // XACK
        (Retry, CLAIM, NOTHING, C::No, REQUEUE),     // stays in the PEL
        (Drop, CLAIM, NOTHING, C::No, REJECT),       // XACK
        (Ack, PUBSUB, NOTHING, C::No, UNSUPPORTED),
        (Retry, PUBSUB, NOTHING, C::No, UNSUPPORTED),
        (Drop, PUBSUB, NOTHING, C::No, UNSUPPORTED),
        // Delayed retry: 1. in-process (ack now, XADD the copy after d, counter + 1);
        // 2. DurableZset; 3. claiming (left unacked); lists, Pub/Sub: the in-process copy.
        (AFTER, STREAM, NOTHING, C::RAfter, REJECT),   // XACK now
        (AFTER, ZSET, NOTHING, C::No, REQUEUE_AFTER),
        (AFTER, CLAIM, NOTHING, C::No, REQUEUE_AFTER),
        (AFTER, PUBSUB, NOTHING, C::RAfter, UNTOUCHED),
        // "claiming counts with the delivery counter in the PEL; every other form with the
        // retry-count header".
        (Retry, CLAIM, BELOW, C::No, REQUEUE),
        (Retry, CLAIM, AT, C::No, REJECT),
        (Retry, CLAIM, ABOVE_DL, C::Dl, REMOVE),
        (Retry, STREAM, BELOW, C::R, REMOVE),
        (Retry, STREAM, AT_DL, C::Dl, REMOVE),
    ]);
}

/// Every consistent set of capabilities: a form that does not settle can do nothing but
/// count; a broker that dead-letters itself also requeues and counts.
fn all_capabilities() -> Vec<Capabilities> {
    (0u8..32)
        .map(|bits| form("", bits).1)
        .filter(|c| c.settles || !(c.requeues || c.delays.is_some() || c.dead_letters))
        .filter(|c| !c.dead_letters || (c.requeues && c.counts))
        .collect()
}

#[test]
fn invariants() {
    let verdicts = [Ack, Drop, Retry, Verdict::RetryAfter(Duration::ZERO), AFTER];
    let mut decls = Vec::new();
    for cap in [0, 1, CAP] {
        for (dl, rt) in [(false, false), (false, true), (true, false), (true, true)] {
            decls.push(declaration(Decl("", cap, dl, &[]), rt));
        }
    }
    let (mut inputs, mut checks) = (0, 0);
    for caps in all_capabilities() {
        for counts in [false, true].into_iter().filter(|&c| !c || caps.counts) {
            for (verdict, decl) in verdicts
                .iter()
                .flat_map(|v| decls.iter().map(move |d| (v, d)))
            {
                for attempt in 1..=5 {
                    inputs += 1;
                    checks += invariants_of(*verdict, Facts { attempt, counts }, caps, decl);
                }
            }
        }
    }
    // 12 consistent capability sets, 7 of them counting (19 with the delivery's count)
    // × 5 verdicts × 12 declarations × 5 attempts.
    assert_eq!(inputs, 19 * 5 * 12 * 5);
    eprintln!("{inputs} inputs, {checks} invariant checks");
}

/// Checks the cross-cutting invariants of one decision; returns how many were checked.
#[rustfmt::skip]
fn invariants_of(verdict: Verdict, facts: Facts, caps: Capabilities, decl: &Declaration) -> usize {
    let plan = decide(verdict, facts, caps, decl, &Address::new(OWN));
    let ctx = format!("{verdict:?} {caps:?} {facts:?} {decl:?} => {plan:?}");
    let mut checks = 0;
    let mut inv = |ok: bool, name: &str| {
        checks += 1;
        assert!(ok, "invariant `{name}` broken: {ctx}");
    };
    let delay = match verdict { Verdict::RetryAfter(d) => Some(d), _ => None };
    let retrying = matches!(verdict, Retry | Verdict::RetryAfter(_));
    let cap = decl.max_attempts.map(NonZeroU32::get);
    let spent = cap.is_some_and(|n| facts.attempt >= n);
    let dl = decl.dead_letter.is_some();
    let o = plan.original;
    let delayed_copy = plan.copy.as_ref().is_some_and(|c| c.delay.is_some());
    let removed = matches!(o, Original::Settle(Settlement::Remove) | Original::Untouched)
        || (delayed_copy && o == Original::Settle(Settlement::Reject));
    let requeue = matches!(o, Original::Hold(..) | Original::Settle(Settlement::Requeue));
    let requeue_after = matches!(o, Original::Settle(Settlement::RequeueAfter(_)));
    let retry_copy = plan.copy.as_ref().filter(|c| c.retry_count.is_some());
    let dead_copy = plan.copy.as_ref().filter(|c| c.retry_count.is_none());

    if !retrying {
        let s = if verdict == Ack { Settlement::Accept } else { Settlement::Reject };
        let want = if caps.settles { Original::Settle(s) } else { Original::Unsupported };
        inv(plan.copy.is_none(), "ack/drop never copy");
        inv(o == want, "ack/drop settle as named, or Unsupported");
    }
    // A copy replaces the original: published before it is removed (no delay), or the
    // original settled now and the copy published later. Never a copy next to a requeue.
    inv(plan.copy.is_none() || removed, "a copy, then the original removed or untouched");
    inv(!removed || plan.copy.is_some(), "the original removed only for a copy");
    inv(caps.settles || !matches!(o, Original::Settle(_) | Original::Hold(..)), "no settling");
    inv(o != Original::Untouched || !caps.settles, "untouched only where it cannot settle");
    inv(!requeue || caps.requeues, "no requeue on a form that cannot requeue");
    if let Original::Settle(Settlement::RequeueAfter(d)) = o {
        inv(caps.delays.is_some() && delay == Some(d), "own delay only where the form delays, for d");
    }
    if let Original::Hold(d, s) = o {
        let ok = caps.dead_letters && caps.delays.is_none() && delay == Some(d) && s == Settlement::Requeue;
        inv(ok, "hold only on a self-dead-lettering broker without delay");
    }
    if let Some(c) = retry_copy {
        let r = decl.retry_to.as_ref().map_or(OWN, Address::as_str);
        inv(c.retry_count == Some(facts.attempt), "retry_count = the attempt it replaces");
        inv(c.to.as_str() == r, "a retry copy goes to R, else its own address");
        inv(c.delay == delay, "a retry copy waits exactly d (retry: not at all)");
    }
    if let Some(c) = dead_copy {
        inv(dl && c.to.as_str() == DEAD && c.delay.is_none(), "a dead letter goes now, to L");
    }
    if retrying && spent && !caps.dead_letters {
        inv(retry_copy.is_none() && !requeue && !requeue_after, "spent: no retry");
        inv(plan.copy.is_some() == dl, "spent: a dead letter iff L is declared");
    }
    if retrying && caps.dead_letters {
        inv(plan.copy.is_none() && (requeue || requeue_after), "self-dead-lettering: back");
    }
    if retrying && cap.is_none() && dl && !caps.dead_letters {
        inv(dead_copy.is_some(), "a dead letter without a cap takes every retry");
    }
    if retrying {
        inv(o != Original::Settle(Settlement::Accept), "a retry never accepts");
        inv(o != Original::Settle(Settlement::Reject) || (spent && !dl) || delayed_copy, "reject: spent, no L, or a delayed copy's original");
        // §6, "declared, below the cap | counts: the broker's own requeue (Unsupported where
        // the form cannot requeue)"; with nothing declared a settling form copies instead.
        let cannot = !caps.settles || (facts.counts && !caps.requeues && decl.is_declared());
        inv(o != Original::Unsupported || cannot, "Unsupported only where it cannot");
    }
    // Below the cap (or nothing declared), on a form with no delayed redelivery of its own.
    let retryable = !spent && (cap.is_some() || !dl);
    if delay.is_some() && retryable && !(caps.delays.is_some() || caps.dead_letters) {
        inv(retry_copy.is_some(), "retry_after without a delay of its own: an in-process copy");
    }
    checks
}

/// "A native delay has a declared bound; beyond it the decision falls back to the form's
/// next mechanism": a claiming form honours delays up to `min_idle`; a longer
/// `retry_after` is the runtime's delayed copy, as on a form that does not delay. A
/// broker that dead-letters itself holds the delivery for a delay beyond its bound.
#[test]
fn native_delay_beyond_its_bound_falls_back() {
    let bound = Duration::from_secs(30);
    let bounded = |Form(_, caps, counts): Form| {
        let caps = Capabilities {
            delays: caps.delays.map(|_| bound),
            ..caps
        };
        (caps, counts)
    };
    let own = Address::new(OWN);
    for decl in [NOTHING, BELOW] {
        let declaration = declaration(decl, false);
        let (caps, counts) = bounded(CLAIM);
        let facts = Facts { attempt: 1, counts };
        let short = decide(
            Verdict::RetryAfter(Duration::from_secs(1)),
            facts,
            caps,
            &declaration,
            &own,
        );
        assert_eq!(
            short.original,
            Original::Settle(Settlement::RequeueAfter(Duration::from_secs(1))),
            "{decl:?}"
        );
        assert!(short.copy.is_none());
        let equal = decide(Verdict::RetryAfter(bound), facts, caps, &declaration, &own);
        assert_eq!(
            equal.original,
            Original::Settle(Settlement::RequeueAfter(bound)),
            "{decl:?}"
        );
        let long = Duration::from_secs(3600);
        let plan = decide(Verdict::RetryAfter(long), facts, caps, &declaration, &own);
        assert_eq!(
            plan,
            Plan {
                copy: Some(Republish {
                    to: own.clone(),
                    retry_count: Some(1),
                    delay: Some(long)
                }),
                original: Original::Settle(Settlement::Reject),
            },
            "{decl:?}"
        );
    }
    let (caps, counts) = bounded(JET);
    let long = Duration::from_secs(3600);
    let plan = decide(
        Verdict::RetryAfter(long),
        Facts { attempt: 1, counts },
        caps,
        &declaration(BELOW, false),
        &own,
    );
    assert_eq!(plan.original, Original::Hold(long, Settlement::Requeue));
    assert!(plan.copy.is_none());
}
