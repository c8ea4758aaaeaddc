//! The lease conformance suite against each implementation: in process, a
//! real `nats-server -js` (Debian's 2.9 does: the leases use no per-key TTL),
//! and a real PostgreSQL cluster, each test on its own server. Two handles
//! on two connections stand for two processes. Then what only a shared
//! backend must show: a released lease leaves nothing behind, so listing
//! the lapsed ones costs what the leases held cost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod lease_conformance;

mod memory {
    use std::sync::Arc;

    use roundtable_thread_stream::lease::MemoryLeases;

    use super::lease_conformance::{self, Replicas};
    use crate::lease_suite;

    lease_suite!(async { (Replicas::one(Arc::new(MemoryLeases::new())), ()) });
}

#[cfg(feature = "nats")]
mod nats {
    use std::sync::Arc;
    use std::time::Duration;

    use roundtable_test_support::nats::{NatsServer, connect_when_up};
    use roundtable_thread_stream::lease::{NatsLeaseOptions, NatsLeases};
    use roundtable_thread_stream::{NatsOptions, NatsStore, connect_nats};

    use super::lease_conformance::{self, Replicas};
    use crate::lease_suite;

    fn options() -> NatsLeaseOptions {
        NatsLeaseOptions {
            request_timeout: Duration::from_secs(5),
            ..NatsLeaseOptions::default()
        }
    }

    /// Leases from a store's connection and from a second connection.
    async fn replicas(server: &NatsServer) -> Replicas {
        let url = server.url();
        let store =
            connect_when_up(&url, || NatsStore::connect(&url, NatsOptions::default())).await;
        let a = store.leases(&options()).await.unwrap();
        let client = connect_nats(&url, Duration::from_secs(5), Duration::from_secs(5))
            .await
            .unwrap();
        let b = NatsLeases::open(client, &options()).await.unwrap();
        Replicas {
            a: Arc::new(a),
            b: Arc::new(b),
        }
    }

    lease_suite!(async {
        let server = NatsServer::start();
        (replicas(&server).await, server)
    });

    /// The messages in the bucket's stream.
    async fn stored(server: &NatsServer) -> u64 {
        let client = async_nats::connect(server.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let mut stream = js.get_stream("KV_ROUNDTABLE_LEASES").await.unwrap();
        stream.info().await.unwrap().state.messages
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bucket_holds_only_the_leases_held() {
        let server = NatsServer::start();
        let r = replicas(&server).await;
        lease_conformance::release_leaves_nothing_behind(&r).await;
        assert_eq!(stored(&server).await, 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_outlive_a_server_restart() {
        let mut server = NatsServer::start();
        let r = replicas(&server).await;
        lease_conformance::a_lease_outlives_a_restart(&r, || server.restart()).await;
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use roundtable_test_support::postgres::PostgresServer;
    use roundtable_thread_stream::lease::PostgresLeases;
    use roundtable_thread_stream::{PostgresOptions, PostgresStore};

    use super::lease_conformance::{self, Replicas};
    use crate::lease_suite;

    fn options() -> PostgresOptions {
        PostgresOptions {
            retry_for: Duration::from_secs(30),
            ..PostgresOptions::default()
        }
    }

    /// Leases from a store's connection and from a connection of their own.
    async fn replicas(server: &PostgresServer) -> Replicas {
        let store = PostgresStore::connect(&server.url(), options())
            .await
            .unwrap_or_else(|e| panic!("cannot open the store: {e}\n{}", server.log()));
        let b = PostgresLeases::connect(&server.url(), options())
            .await
            .unwrap();
        Replicas {
            a: Arc::new(store.leases()),
            b: Arc::new(b),
        }
    }

    lease_suite!(async {
        let server = PostgresServer::start();
        (replicas(&server).await, server)
    });

    async fn rows(server: &PostgresServer) -> i64 {
        let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .query_one("SELECT count(*) FROM roundtable.leases", &[])
            .await
            .unwrap()
            .get(0)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_table_holds_only_the_leases_held() {
        let server = PostgresServer::start();
        let r = replicas(&server).await;
        lease_conformance::release_leaves_nothing_behind(&r).await;
        assert_eq!(rows(&server).await, 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_outlive_a_server_restart() {
        let mut server = PostgresServer::start_durable();
        let r = replicas(&server).await;
        lease_conformance::a_lease_outlives_a_restart(&r, || {
            server.stop();
            server.start_again();
        })
        .await;
    }
}
