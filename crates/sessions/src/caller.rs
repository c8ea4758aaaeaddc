//! Who makes a call, and which sessions they may see: a session may belong
//! to a user; another user's session is "not found" (never "forbidden":
//! its existence is not revealed).

use std::sync::Arc;

use crate::records::SessionCreated;

/// Who makes a call to the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// The host itself, trusted: every session.
    Host,
    /// A user: their own sessions, and sessions with no owner when the
    /// engine lets anyone use those.
    User(Arc<str>),
    /// A caller with no identity: sessions with no owner, when the engine
    /// lets anyone use those.
    Anonymous,
}

impl Caller {
    /// A user.
    pub fn user(id: impl Into<Arc<str>>) -> Self {
        Self::User(id.into())
    }

    /// The user's id, if the caller is a user.
    pub fn user_id(&self) -> Option<&Arc<str>> {
        match self {
            Self::User(id) => Some(id),
            Self::Host | Self::Anonymous => None,
        }
    }
}

/// Who may use a session that belongs to nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnownedSessions {
    /// Only the host (the default: a multi-user host never shares a
    /// session by accident).
    #[default]
    HostOnly,
    /// Any caller (a single-user host).
    Anyone,
}

/// True when `caller` may use the session `created`.
pub(crate) fn may_use(caller: &Caller, created: &SessionCreated, unowned: UnownedSessions) -> bool {
    match (caller, &created.owner) {
        (Caller::Host, _) => true,
        (Caller::User(user), Some(owner)) => user == owner,
        (Caller::Anonymous, Some(_)) => false,
        (Caller::User(_) | Caller::Anonymous, None) => unowned == UnownedSessions::Anyone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(owner: Option<&str>) -> SessionCreated {
        SessionCreated {
            workspace_path: "/w".into(),
            system_prompt: None,
            auto_run: true,
            approval_policy: Default::default(),
            verify_policy: Default::default(),
            patch_review: Default::default(),
            owner: owner.map(Arc::from),
            limits: Default::default(),
        }
    }

    #[test]
    fn a_user_sees_their_own_sessions_and_unowned_ones_only_when_allowed() {
        let alice = Caller::user("alice");
        let bob = Caller::user("bob");
        let owned = created(Some("alice"));
        let unowned = created(None);
        for rule in [UnownedSessions::HostOnly, UnownedSessions::Anyone] {
            assert!(may_use(&Caller::Host, &owned, rule));
            assert!(may_use(&Caller::Host, &unowned, rule));
            assert!(may_use(&alice, &owned, rule));
            assert!(!may_use(&bob, &owned, rule));
            assert!(!may_use(&Caller::Anonymous, &owned, rule));
        }
        assert!(!may_use(&bob, &unowned, UnownedSessions::HostOnly));
        assert!(may_use(&bob, &unowned, UnownedSessions::Anyone));
        assert!(!may_use(
            &Caller::Anonymous,
            &unowned,
            UnownedSessions::HostOnly
        ));
        assert!(may_use(
            &Caller::Anonymous,
            &unowned,
            UnownedSessions::Anyone
        ));
    }
}
