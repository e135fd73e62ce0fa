//! Browsing and removing what waits at a stream or a list (`Broker::inspect`, the
//! dead-letter tools), on a real server.

mod support;

use fred::prelude::*;
use ruststream_core::{Address, Broker, InspectError, Message};
use ruststream_redis::Target;
use support::ctx;

fn texts(waiting: &[ruststream_core::Waiting]) -> Vec<String> {
    waiting
        .iter()
        .map(|w| String::from_utf8_lossy(&w.message.payload).into_owned())
        .collect()
}

#[tokio::test]
async fn a_stream_is_browsed_oldest_first_and_entries_removed_by_id() {
    let ctx = ctx().await;
    for n in 0..3 {
        ctx.publish(
            "dead",
            Message::new(format!("m{n}")).with_header("n", format!("{n}")),
        )
        .await;
    }
    let inspect = ctx.broker.inspect().expect("redis inspects");
    let address = Address::from("dead");
    let seen = inspect.browse(&address, 10).await.expect("browse");
    assert_eq!(texts(&seen), ["m0", "m1", "m2"]);
    assert_eq!(seen[1].message.headers.get_str("n"), Some("1"));
    assert_eq!(
        texts(&inspect.browse(&address, 2).await.expect("browse")),
        ["m0", "m1"]
    );
    assert_eq!(ctx.xlen("dead").await, 3, "browsing removes nothing");

    let ids = [seen[1].id.clone(), "not-an-id".into(), "1-1".into()];
    assert_eq!(inspect.remove(&address, &ids).await.expect("remove"), 1);
    assert_eq!(ctx.xlen("dead").await, 2);
    let left = inspect.browse(&address, 10).await.expect("browse");
    assert_eq!(texts(&left), ["m0", "m2"]);
    assert!(
        inspect
            .browse(&"absent".into(), 10)
            .await
            .expect("none")
            .is_empty()
    );
}

#[tokio::test]
async fn a_list_is_browsed_oldest_first_and_exactly_one_element_removed() {
    let ctx = ctx().await;
    ctx.broker.route("dead", Target::List);
    for text in ["a", "twin", "twin", "b"] {
        ctx.publish("dead", Message::new(text).with_header("h", "v"))
            .await;
    }
    // An element wrapped as a processing list holds it (handed back by an older version).
    let mut wrapped = b"\xffRStake-1:0\0".to_vec();
    wrapped.extend_from_slice(b"\0\0\0\0wrapped");
    let key = ctx.key("dead");
    let _: i64 = ctx.admin.lpush(&key, wrapped).await.expect("lpush");

    let inspect = ctx.broker.inspect().expect("redis inspects");
    let address = Address::from("dead");
    let seen = inspect.browse(&address, 10).await.expect("browse");
    assert_eq!(texts(&seen), ["a", "twin", "twin", "b", "wrapped"]);
    assert!(seen.iter().all(|w| w.defect.is_none()));
    assert_eq!(seen[0].message.headers.get_str("h"), Some("v"));
    assert_eq!(
        seen[1].id, seen[2].id,
        "byte-identical elements share an id"
    );
    assert_ne!(seen[0].id, seen[3].id);
    assert_eq!(
        texts(&inspect.browse(&address, 2).await.expect("browse")),
        ["a", "twin"]
    );

    let ids = [
        seen[1].id.clone(),
        seen[4].id.clone(),
        "0000000000000000".into(),
    ];
    assert_eq!(inspect.remove(&address, &ids).await.expect("remove"), 2);
    assert_eq!(ctx.llen(&key).await, 3);
    let left = inspect.browse(&address, 10).await.expect("browse");
    assert_eq!(texts(&left), ["a", "twin", "b"]);
    // Two ids for two twins remove both.
    let twin = left[1].id.clone();
    ctx.publish("dead", Message::new("twin").with_header("h", "v"))
        .await;
    assert_eq!(
        inspect
            .remove(&address, &[twin.clone(), twin])
            .await
            .expect("remove"),
        2
    );
    assert_eq!(
        texts(&inspect.browse(&address, 10).await.expect("browse")),
        ["a", "b"]
    );
}

#[tokio::test]
async fn keys_of_other_types_are_refused_by_name() {
    let ctx = ctx().await;
    let key = ctx.key("text");
    let _: () = ctx
        .admin
        .set(&key, "x", None, None, false)
        .await
        .expect("set");
    let error = ctx
        .broker
        .inspect()
        .expect("inspect")
        .browse(&"text".into(), 5)
        .await
        .expect_err("a string");
    match error {
        InspectError::Unsupported { reason, .. } => {
            assert!(reason.contains("string"), "{reason}")
        }
        other => panic!("{other}"),
    }
}
