//! Browsing a queue's rows and removing rows by id (the dead-letter tools).

use ruststream_core::{Address, BoxFuture, Inspect, InspectError, Message, Waiting};
use sqlx::Row;

use crate::inner::Inner;
use crate::row;

/// Ids are the rows' ids; browsing reads without claiming, so it counts no attempt.
impl Inspect for Inner {
    fn browse(
        &self,
        address: &Address,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<Waiting>, InspectError>> {
        let queue = address.as_str().to_owned();
        Box::pin(async move {
            let statement = format!(
                "SELECT id, payload, header_names, header_values FROM {}
                 WHERE queue = $1 ORDER BY id LIMIT $2",
                self.names.messages
            );
            let rows = sqlx::query(&statement)
                .bind(queue)
                .bind(i64::try_from(max).unwrap_or(i64::MAX))
                .fetch_all(&self.pool)
                .await
                .map_err(broker)?;
            rows.into_iter()
                .map(|found| {
                    let id: i64 = found.try_get("id").map_err(broker)?;
                    let (message, defect) = row::message(
                        found.try_get("payload").map_err(broker)?,
                        found.try_get("header_names").map_err(broker)?,
                        found.try_get("header_values").map_err(broker)?,
                    );
                    Ok(Waiting {
                        defect,
                        ..Waiting::new(id.to_string(), message)
                    })
                })
                .collect()
        })
    }

    fn remove<'a>(
        &'a self,
        address: &'a Address,
        ids: &'a [String],
    ) -> BoxFuture<'a, Result<usize, InspectError>> {
        Box::pin(async move {
            // An id that is not a row's is not there.
            let ids: Vec<i64> = ids.iter().filter_map(|id| id.parse().ok()).collect();
            let statement = format!(
                "DELETE FROM {} WHERE queue = $1 AND id = ANY($2)",
                self.names.messages
            );
            let done = sqlx::query(&statement)
                .bind(address.as_str())
                .bind(ids)
                .execute(&self.pool)
                .await
                .map_err(broker)?;
            Ok(done.rows_affected() as usize)
        })
    }

    /// The dead letter's row deleted and its copy inserted (with its `NOTIFY`) in one
    /// statement.
    fn replace<'a>(
        &'a self,
        address: &'a Address,
        id: &'a str,
        to: &'a Address,
        copy: &'a Message,
    ) -> Option<BoxFuture<'a, Result<bool, InspectError>>> {
        Some(Box::pin(async move {
            let Ok(id) = id.parse::<i64>() else {
                return Ok(false);
            };
            let original = crate::moves::Original::Waiting { queue: address };
            crate::moves::replace(self, id, original, to, copy)
                .await
                .map_err(broker)
        }))
    }
}

fn broker(error: sqlx::Error) -> InspectError {
    InspectError::Broker(error.to_string())
}
