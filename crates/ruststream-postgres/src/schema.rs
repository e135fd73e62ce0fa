//! The adapter's tables, created and migrated at connect: versioned, idempotent, and
//! safe when several processes start at once (an advisory lock held for the migration's
//! transaction).

use sqlx::PgPool;

use crate::ConnectError;

/// Each version's statements, in order; `{schema}` is the adapter's schema.
const MIGRATIONS: &[&[&str]] = &[
    // 1: the queues.
    &[
        "CREATE TABLE IF NOT EXISTS {schema}.ruststream_messages (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue text NOT NULL,
        payload bytea NOT NULL,
        header_names text[] NOT NULL,
        header_values bytea[] NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        leased boolean NOT NULL DEFAULT false,
        visible_at timestamptz NOT NULL DEFAULT now(),
        created_at timestamptz NOT NULL DEFAULT now()
    )",
        "CREATE INDEX IF NOT EXISTS ruststream_messages_ready
        ON {schema}.ruststream_messages (queue, visible_at, id)",
    ],
    // 2: the transactional outbox (`crate::outbox`).
    &[
        "CREATE TABLE IF NOT EXISTS {schema}.ruststream_outbox (
            id bigserial PRIMARY KEY,
            key text,
            destination text NOT NULL,
            payload bytea NOT NULL,
            header_names text[] NOT NULL,
            header_values bytea[] NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            attempts integer NOT NULL DEFAULT 0,
            last_error text,
            retry_at timestamptz NOT NULL DEFAULT now()
        )",
        "CREATE INDEX IF NOT EXISTS ruststream_outbox_key
            ON {schema}.ruststream_outbox (key, id) WHERE key IS NOT NULL",
    ],
    // 3: the archive of settled rows (the `archive` setting).
    &[
        "CREATE TABLE IF NOT EXISTS {schema}.ruststream_archive (
            id bigint PRIMARY KEY,
            queue text NOT NULL,
            payload bytea NOT NULL,
            header_names text[] NOT NULL,
            header_values bytea[] NOT NULL,
            attempts integer NOT NULL,
            created_at timestamptz NOT NULL,
            settled_at timestamptz NOT NULL DEFAULT now(),
            settlement text NOT NULL
        )",
        "CREATE INDEX IF NOT EXISTS ruststream_archive_settled
            ON {schema}.ruststream_archive (queue, settled_at)",
    ],
];

/// The schema version this build of the adapter writes.
pub const VERSION: i32 = MIGRATIONS.len() as i32;

/// The names the adapter's statements use in `schema`.
#[derive(Clone, Debug)]
pub(crate) struct Names {
    /// The schema, as given (an identifier the settings checked).
    pub(crate) schema: String,
    /// `schema.ruststream_messages`.
    pub(crate) messages: String,
    /// The channel publishes notify.
    pub(crate) channel: String,
    /// `schema.ruststream_outbox`.
    pub(crate) outbox: String,
    /// `schema.ruststream_archive`.
    pub(crate) archive: String,
    /// The channel outbox inserts notify.
    pub(crate) outbox_channel: String,
}

impl Names {
    /// The names in `schema`.
    pub(crate) fn new(schema: &str) -> Self {
        Self {
            schema: schema.to_owned(),
            messages: format!("{schema}.ruststream_messages"),
            channel: format!("{schema}_ruststream"),
            outbox: format!("{schema}.ruststream_outbox"),
            archive: format!("{schema}.ruststream_archive"),
            outbox_channel: format!("{schema}_rs_outbox"),
        }
    }
}

/// The columns each table of [`VERSION`] has, with their types as
/// `information_schema.columns.data_type` names them.
const COLUMNS: &[(&str, &[(&str, &str)])] = &[
    (
        "ruststream_messages",
        &[
            ("id", "bigint"),
            ("queue", "text"),
            ("payload", "bytea"),
            ("header_names", "ARRAY"),
            ("header_values", "ARRAY"),
            ("attempts", "integer"),
            ("leased", "boolean"),
            ("visible_at", "timestamp with time zone"),
            ("created_at", "timestamp with time zone"),
        ],
    ),
    (
        "ruststream_outbox",
        &[
            ("id", "bigint"),
            ("key", "text"),
            ("destination", "text"),
            ("payload", "bytea"),
            ("header_names", "ARRAY"),
            ("header_values", "ARRAY"),
            ("created_at", "timestamp with time zone"),
            ("attempts", "integer"),
            ("last_error", "text"),
            ("retry_at", "timestamp with time zone"),
        ],
    ),
    (
        "ruststream_archive",
        &[
            ("id", "bigint"),
            ("queue", "text"),
            ("payload", "bytea"),
            ("header_names", "ARRAY"),
            ("header_values", "ARRAY"),
            ("attempts", "integer"),
            ("created_at", "timestamp with time zone"),
            ("settled_at", "timestamp with time zone"),
            ("settlement", "text"),
        ],
    ),
];

/// Refuses a server that takes no writes (a standby, or `default_transaction_read_only`
/// on), before any statement fails on it with a less telling error.
pub(crate) async fn writable(pool: &PgPool, url: &str) -> Result<(), ConnectError> {
    let (standby, read_only): (bool, String) = sqlx::query_as(
        "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')",
    )
    .fetch_one(pool)
    .await
    .map_err(|error| ConnectError::Migration(error.to_string()))?;
    let why = if standby {
        "a standby (pg_is_in_recovery)"
    } else if read_only == "on" {
        "default_transaction_read_only"
    } else {
        return Ok(());
    };
    Err(ConnectError::ReadOnly {
        url: url.to_owned(),
        why,
    })
}

/// Checks that the tables have every column the adapter uses, of its type: a table
/// altered by hand is refused at connect with what differs, instead of failing each
/// statement later. Extra columns are fine (an operator's own).
pub(crate) async fn check(pool: &PgPool, names: &Names) -> Result<(), ConnectError> {
    let found: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text
         FROM information_schema.columns WHERE table_schema = $1",
    )
    .bind(&names.schema)
    .fetch_all(pool)
    .await
    .map_err(|error| ConnectError::Migration(error.to_string()))?;
    for (table, columns) in COLUMNS {
        for (column, kind) in *columns {
            let has = found
                .iter()
                .find(|(t, c, _)| t == table && c == column)
                .map(|(_, _, k)| k.as_str());
            let what = match has {
                Some(k) if k == *kind => continue,
                Some(k) => format!("column {column} is {k}, expected {kind}"),
                None => format!("column {column} ({kind}) is missing"),
            };
            return Err(ConnectError::Altered {
                table: format!("{}.{table}", names.schema),
                what,
            });
        }
    }
    Ok(())
}

/// Brings the schema to [`VERSION`], in one transaction under an advisory lock.
pub(crate) async fn migrate(pool: &PgPool, names: &Names) -> Result<(), ConnectError> {
    let failed = |error: sqlx::Error| ConnectError::Migration(error.to_string());
    let schema = &names.schema;
    let mut tx = pool.begin().await.map_err(failed)?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(format!("ruststream migrations {schema}"))
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
    let setup = [
        format!("CREATE SCHEMA IF NOT EXISTS {schema}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {schema}.ruststream_migrations (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now())"
        ),
    ];
    for statement in &setup {
        sqlx::query(statement)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
    }
    let current: i32 = sqlx::query_scalar(&format!(
        "SELECT coalesce(max(version), 0) FROM {schema}.ruststream_migrations"
    ))
    .fetch_one(&mut *tx)
    .await
    .map_err(failed)?;
    if current > VERSION {
        return Err(ConnectError::Migration(format!(
            "schema {schema} is at version {current}, newer than this adapter's {VERSION}"
        )));
    }
    for (version, statements) in (1..).zip(MIGRATIONS).skip(current as usize) {
        for statement in statements.iter() {
            sqlx::query(&statement.replace("{schema}", schema))
                .execute(&mut *tx)
                .await
                .map_err(failed)?;
        }
        sqlx::query(&format!(
            "INSERT INTO {schema}.ruststream_migrations (version) VALUES ($1)"
        ))
        .bind(version)
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
    }
    tx.commit().await.map_err(failed)
}
