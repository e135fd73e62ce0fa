//! The consumer's rebalance callbacks: the group's partitions follow its assignments,
//! and a partition taken away gets its last commit before it goes (unless the group
//! has already given it to another member).

use std::sync::Arc;

use rdkafka::ClientContext;
use rdkafka::TopicPartitionList;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};

use crate::group::{Commit, Group};
use crate::said::Said;

/// The consumer type of a subscription.
pub(crate) type KafkaConsumer = rdkafka::consumer::StreamConsumer<Context>;

/// The context of a subscription's consumer.
pub(crate) struct Context {
    pub(crate) group: Arc<Group>,
    pub(crate) said: Said,
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, line: &str) {
        self.said.log(level, facility, line);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.said.error(&error, reason);
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let partitions = list
                .elements()
                .iter()
                .map(|e| e.partition())
                .collect::<Vec<_>>();
            let positions = self.group.revoke(partitions);
            // A lost assignment (the consumer was put out of its group: no poll within
            // `max_poll_interval`, no heartbeat within the session) is another member's
            // already, and Kafka refuses a commit from outside the group's generation.
            // What was settled since the last commit is read again by the new owner.
            if consumer.assignment_lost() {
                if !positions.is_empty() {
                    tracing::info!(topic = %self.group.topic,
                        "kafka: partitions lost to the group; their last settlements are not committed");
                }
            } else if !positions.is_empty() {
                // Asynchronous: librdkafka lets the partitions go only once its commits
                // are answered (or their wait for a coordinator has timed out). A
                // synchronous one waits here, inside librdkafka's rebalance, and at a
                // close it could wait for ever (the group waits for this callback).
                // Its answer reaches no callback (rdkafka 0.39 sets no
                // `offset_commit_cb` for an application's asynchronous commit): a
                // failure is silent and the next owner repeats what was settled since
                // the last commit; a refusal of the notes is learned from the
                // committer's synchronous commits (`commit_sync`).
                let list = offsets(&self.group.topic, &positions);
                if let Err(error) = consumer.commit(&list, CommitMode::Async) {
                    tracing::warn!(topic = %self.group.topic, %error, "commit at a rebalance failed");
                }
            }
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(list) => {
                self.group
                    .assign(list.elements().iter().map(|e| e.partition()));
                // Key order pauses a partition that holds too many records back; librdkafka
                // keeps an application's pause across a revoke and an assignment, and the
                // partition assigned anew holds nothing back.
                if self.group.ordered()
                    && let Err(error) = consumer.resume(list)
                {
                    tracing::warn!(topic = %self.group.topic, %error, "kafka: cannot resume assigned partitions");
                }
                self.group.attached.attach();
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(error) => {
                tracing::warn!(topic = %self.group.topic, %error, "rebalance failed");
                self.group.attached.detach();
            }
        }
    }
}

/// The commits `commits` of `topic` as a partition list, each offset with its metadata.
pub(crate) fn offsets(topic: &str, commits: &[Commit]) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for commit in commits {
        let mut element = list.add_partition(topic, commit.partition);
        // Not reached with a valid offset: setting one cannot fail.
        let _ = element.set_offset(rdkafka::Offset::Offset(commit.offset));
        if let Some(metadata) = &commit.metadata {
            element.set_metadata(metadata.as_str());
        }
    }
    list
}

/// What is said once when the cluster refuses the retry notes.
const REFUSED: &str = "kafka: the cluster refuses the retry notes as too large; \
    committing the offsets without them from now on";

/// Commits `commits` of `topic` and waits for the answer. A broker that refuses the
/// metadata as too large (its `offset.metadata.max.bytes`: Kafka's default is 4,096,
/// and key order's notes keep within 4,000, but a cluster may set less) gets the
/// offsets again without it: the positions must not be lost for want of the notes
/// (those records then start again at attempt 1 for the next consumer), and no later
/// commit of the subscription carries notes ([`Group::refuse_notes`]).
pub(crate) fn commit_sync(
    consumer: &impl Consumer<Context>,
    topic: &str,
    commits: &[Commit],
) -> KafkaResult<()> {
    match consumer.commit(&offsets(topic, commits), CommitMode::Sync) {
        Err(error) if too_large(&error) && commits.iter().any(|c| c.metadata.is_some()) => {
            if consumer.context().group.refuse_notes() {
                tracing::warn!(%topic, %error, REFUSED);
            }
            consumer.commit(
                &offsets(topic, &without_metadata(commits)),
                CommitMode::Sync,
            )
        }
        done => done,
    }
}

/// Whether `error` is the broker refusing a commit's metadata as too large.
fn too_large(error: &KafkaError) -> bool {
    error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::OffsetMetadataTooLarge)
}

/// `commits` with no metadata.
fn without_metadata(commits: &[Commit]) -> Vec<Commit> {
    commits
        .iter()
        .map(|commit| Commit {
            metadata: None,
            ..commit.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode;

    use super::{offsets, too_large, without_metadata};
    use crate::group::Commit;

    #[test]
    fn only_a_metadata_refusal_commits_again_and_then_without_notes() {
        let refused = KafkaError::ConsumerCommit(RDKafkaErrorCode::OffsetMetadataTooLarge);
        assert!(too_large(&refused));
        for other in [
            KafkaError::ConsumerCommit(RDKafkaErrorCode::RebalanceInProgress),
            KafkaError::ConsumerCommit(RDKafkaErrorCode::UnknownMemberId),
        ] {
            assert!(!too_large(&other), "{other}");
        }
        let commits = [Commit {
            partition: 2,
            offset: 9,
            metadata: Some("ruststream-retries:9:2:0".into()),
        }];
        let noted = offsets("t", &commits);
        let element = noted.find_partition("t", 2).expect("listed");
        assert_eq!(element.metadata(), "ruststream-retries:9:2:0");
        let bare = offsets("t", &without_metadata(&commits));
        let element = bare.find_partition("t", 2).expect("listed");
        assert_eq!(
            (element.offset(), element.metadata()),
            (rdkafka::Offset::Offset(9), "")
        );
    }
}
