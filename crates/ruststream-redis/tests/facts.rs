//! The facts `RedisBroker::facts` tells without subscribing are those each form's
//! subscription declares.

mod support;

use std::time::Duration;

use ruststream_core::{Address, Broker, Declaration, Options, SubscribeSpec};
use ruststream_redis::{Claiming, DelayedRetry, Form, List, Pattern, PubSub, ReliableList, Stream};

fn spec(address: &str, form: Form) -> SubscribeSpec {
    let mut options = Options::default();
    options.insert(form);
    SubscribeSpec {
        address: Address::new(address),
        declaration: Declaration {
            retry_to: Some(Address::new(format!("{address}.retry"))),
            ..Declaration::default()
        },
        in_flight: 4,
        options,
        drain: Default::default(),
    }
}

#[tokio::test]
async fn every_form_declares_the_facts_told_beforehand() {
    let ctx = support::ctx().await;
    let forms: Vec<(&str, Form)> = vec![
        ("stream", Stream::new().into()),
        (
            "durable",
            Stream::new()
                .delayed_retry(DelayedRetry::DurableZset)
                .into(),
        ),
        ("claiming", Claiming::new(Duration::from_secs(7)).into()),
        ("reliable", ReliableList::new().into()),
        ("list", List::new().into()),
        ("pubsub", PubSub::new().into()),
        ("pattern.*", Pattern::new().into()),
    ];
    for (address, form) in forms {
        let told = ctx.broker.facts(&spec(address, form.clone()));
        let subscription = ctx
            .broker
            .subscribe(spec(address, form))
            .await
            .unwrap_or_else(|e| panic!("{address}: {e}"));
        assert_eq!(told, Some(subscription.capabilities), "{address}");
    }
    assert_eq!(
        ctx.broker
            .facts(&spec("zero", Claiming::new(Duration::ZERO).into())),
        None,
        "a form refused at subscribe has no facts"
    );
    ctx.broker.close().await;
}
