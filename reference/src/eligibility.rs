//! Spawn eligibility (seed 000, "Boundaries and authority" and "Delegated prompt and project
//! context"): which Project instruction scope a spawned session gets, from the durable
//! conversation rows and the accounts. Pure data in, a decision out; nothing here touches a file.
//!
//! The decision, in order (spec-cases/DECISIONS.md, "Eligibility and delegation"):
//! 1. The ancestry walk (`delegationRoot`) goes from the spawned row up its `parent_session_id`
//!    chain to the first row that is not a sub-agent (the root). It refuses, and the session gets
//!    nothing: a parent id that names no row (a missing row), a sub-agent with no parent (an
//!    orphaned child, wherever it stands in the chain), a row seen twice (a cycle, a self-parent
//!    included), an edge whose two rows belong to different accounts, a root kind that records a
//!    parent, and any row whose id is a cron execution's (`brain-ch-cron-*`). Every row is visited
//!    at most once, so a hostile chain costs time linear in the rows, never more.
//! 2. A chatbot account gets its bound Project only ([`Scope::BoundOnly`]): no cwd lookup and no
//!    inherited scope; an unbound chatbot gets nothing.
//! 3. An administrator gets the owner-chat scope ([`Scope::Full`]) when the root is the
//!    administrator's own chat; every other root (a shared room, a shared platform conversation,
//!    a shared channel, a cron execution) and every other account gets nothing.
//!
//! Captured admin and owner bits are carried but never consulted: "Captured admin or owner bits
//! alone are insufficient: an administrator in a shared room can hold them too." A scheduled
//! turn is carried but changes nothing: it keeps the scope of the conversation it is delivered
//! into. A fork takes its parent's root selection: the working directory of the first non-fork
//! row above it, and the policies of every row up to there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;

/// The id prefix of a cron execution's conversation: "a brain-ch-cron-* root does not" retain
/// the owner-chat scope.
pub const CRON_ROOT_PREFIX: &str = "brain-ch-cron-";

/// What an account is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An administrator: its own chat and its delegated sub-agents get the Project scope.
    Administrator,
    /// Any other person's account: it receives nothing new.
    User,
    /// A chatbot: only its bound Project, when its live policy admits it.
    Chatbot,
}

/// An account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// What it is.
    pub role: Role,
    /// The Project a chatbot is bound to.
    pub bound: Option<PathBuf>,
    /// The account's live policy: the Projects it may access. `None`: every Project.
    pub policy: Option<Vec<PathBuf>>,
}

/// What a conversation row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The account's own conversation (`isOwnedUserSession`).
    OwnerChat,
    /// A room several people share.
    SharedRoom,
    /// A shared conversation on a chat platform.
    PlatformConversation,
    /// A shared channel.
    SharedChannel,
    /// A cron execution's conversation (`brain-ch-cron-*`).
    CronExecution,
    /// A delegated session: it has a parent. A fork is one with `fork` set.
    SubAgent,
}

/// One durable conversation row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The session id.
    pub id: String,
    /// The owning account's name.
    pub account: String,
    /// What it is.
    pub kind: Kind,
    /// `parent_session_id`: may name no row (a missing row).
    pub parent: Option<String>,
    /// A fork of its parent rather than a fresh sub-agent.
    pub fork: bool,
    /// Its turn was scheduled. Never consulted: a scheduled turn keeps the scope of the
    /// conversation it is delivered into.
    pub scheduled: bool,
    /// The captured admin bit. Never consulted (see the module docs).
    pub admin: bool,
    /// The captured owner bit. Never consulted (see the module docs).
    pub owner: bool,
    /// The recorded working directory; `None`: the session's default.
    pub cwd: Option<PathBuf>,
    /// The session's own (scoped) policy: the Projects it may access. `None`: no restriction of
    /// its own.
    pub policy: Option<Vec<PathBuf>>,
}

/// What a spawn is decided from: the accounts, the durable rows and the spawned id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spawn {
    /// Accounts by name.
    pub accounts: BTreeMap<String, Account>,
    /// The durable rows, in any order.
    pub conversations: Vec<Conversation>,
    /// The id of the session being spawned.
    pub spawned: String,
}

/// The Project instruction scope of a spawned session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The owner-chat scope: root placement as for any host session, from `cwd` (`None`: the
    /// default working directory), over the Projects that every one of `policies` admits.
    Full {
        /// The working directory the root is placed from.
        cwd: Option<PathBuf>,
        /// Each list is a policy; a Project is accessible only when every one admits it.
        policies: Vec<Vec<PathBuf>>,
    },
    /// The chatbot exception: this Project's root file and modules, when every policy admits it.
    BoundOnly {
        /// The chatbot's bound Project.
        project: PathBuf,
        /// Each list is a policy, the chatbot's live policy first.
        policies: Vec<Vec<PathBuf>>,
    },
    /// Nothing new: no startup file and no activation.
    Nothing(Refusal),
}

/// Why a session gets nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Two rows share this id: neither proves anything.
    DuplicateRow(String),
    /// This id (the spawned one, or a parent id) names no row.
    MissingRow(String),
    /// This sub-agent records no parent.
    Orphan(String),
    /// The walk came back to this row.
    Cycle(String),
    /// An edge joins rows of different accounts: (child, parent).
    AccountMismatch(String, String),
    /// A row names an account that does not exist.
    UnknownAccount(String),
    /// A root kind records a parent.
    RootWithParent(String),
    /// The chain meets a cron execution.
    CronRoot(String),
    /// The root is not the account's own chat.
    NotOwnerChat(Kind),
    /// The account is not an administrator.
    NotAdministrator(String),
    /// A chatbot without a bound Project.
    UnboundChatbot(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::DuplicateRow(id) => write!(f, "two rows have the id '{id}'"),
            Refusal::MissingRow(id) => write!(f, "no row has the id '{id}'"),
            Refusal::Orphan(id) => write!(f, "sub-agent '{id}' has no parent"),
            Refusal::Cycle(id) => write!(f, "the chain comes back to '{id}'"),
            Refusal::AccountMismatch(c, p) => write!(f, "'{c}' and its parent '{p}' belong to different accounts"),
            Refusal::UnknownAccount(a) => write!(f, "no account is named '{a}'"),
            Refusal::RootWithParent(id) => write!(f, "'{id}' is no sub-agent but records a parent"),
            Refusal::CronRoot(id) => write!(f, "the chain meets the cron execution '{id}'"),
            Refusal::NotOwnerChat(k) => write!(f, "the chain ends in a {k:?}, not the account's own chat"),
            Refusal::NotAdministrator(a) => write!(f, "account '{a}' is not an administrator"),
            Refusal::UnboundChatbot(a) => write!(f, "chatbot '{a}' has no bound Project"),
        }
    }
}

/// Decides the spawned session's scope (seed 000, "Boundaries and authority").
pub fn instruction_scope(s: &Spawn) -> Scope {
    match walk(s) {
        Ok(scope) => scope,
        Err(refusal) => Scope::Nothing(refusal),
    }
}

fn walk(s: &Spawn) -> Result<Scope, Refusal> {
    let mut rows: HashMap<&str, &Conversation> = HashMap::with_capacity(s.conversations.len());
    for c in &s.conversations {
        if rows.insert(c.id.as_str(), c).is_some() {
            return Err(Refusal::DuplicateRow(c.id.clone()));
        }
    }
    let spawned = *rows.get(s.spawned.as_str()).ok_or_else(|| Refusal::MissingRow(s.spawned.clone()))?;
    let account = s.accounts.get(&spawned.account).ok_or_else(|| Refusal::UnknownAccount(spawned.account.clone()))?;
    let mut policies: Vec<Vec<PathBuf>> = account.policy.iter().cloned().collect();
    let mut cwd = None;
    // Root selection moves up through forks: a fork places its root as its parent does.
    let mut selecting = true;
    let mut seen: HashSet<&str> = HashSet::new();
    let mut cur = spawned;
    let root = loop {
        if !seen.insert(cur.id.as_str()) {
            return Err(Refusal::Cycle(cur.id.clone()));
        }
        if cur.id.starts_with(CRON_ROOT_PREFIX) {
            return Err(Refusal::CronRoot(cur.id.clone()));
        }
        if selecting {
            policies.extend(cur.policy.iter().cloned());
            if !(cur.fork && cur.kind == Kind::SubAgent) {
                cwd.clone_from(&cur.cwd);
                selecting = false;
            }
        }
        if cur.kind != Kind::SubAgent {
            if cur.parent.is_some() {
                return Err(Refusal::RootWithParent(cur.id.clone()));
            }
            break cur;
        }
        let parent_id = cur.parent.as_deref().ok_or_else(|| Refusal::Orphan(cur.id.clone()))?;
        let parent = *rows.get(parent_id).ok_or_else(|| Refusal::MissingRow(parent_id.to_string()))?;
        if parent.account != cur.account {
            return Err(Refusal::AccountMismatch(cur.id.clone(), parent.id.clone()));
        }
        cur = parent;
    };
    match account.role {
        Role::Chatbot => match &account.bound {
            Some(project) => Ok(Scope::BoundOnly { project: project.clone(), policies }),
            None => Err(Refusal::UnboundChatbot(spawned.account.clone())),
        },
        Role::User => Err(Refusal::NotAdministrator(spawned.account.clone())),
        Role::Administrator if root.kind == Kind::OwnerChat => Ok(Scope::Full { cwd, policies }),
        Role::Administrator => Err(Refusal::NotOwnerChat(root.kind)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, account: &str, kind: Kind, parent: Option<&str>) -> Conversation {
        Conversation {
            id: id.into(),
            account: account.into(),
            kind,
            parent: parent.map(Into::into),
            fork: false,
            scheduled: false,
            admin: false,
            owner: false,
            cwd: None,
            policy: None,
        }
    }

    fn spawn(rows: Vec<Conversation>, spawned: &str) -> Spawn {
        let mut accounts = BTreeMap::new();
        accounts.insert("admin".into(), Account { role: Role::Administrator, bound: None, policy: None });
        accounts.insert("other".into(), Account { role: Role::Administrator, bound: None, policy: None });
        accounts.insert("bot".into(), Account { role: Role::Chatbot, bound: Some("/p".into()), policy: None });
        Spawn { accounts, conversations: rows, spawned: spawned.into() }
    }

    fn full() -> Scope {
        Scope::Full { cwd: None, policies: vec![] }
    }

    #[test]
    fn a_chain_of_many_sub_agents_is_walked_in_linear_time() {
        let n = 200_000;
        let mut rows = vec![row("c0", "admin", Kind::OwnerChat, None)];
        for i in 1..n {
            rows.push(row(&format!("c{i}"), "admin", Kind::SubAgent, Some(&format!("c{}", i - 1))));
        }
        assert_eq!(instruction_scope(&spawn(rows, &format!("c{}", n - 1))), full());
    }

    #[test]
    fn a_long_cycle_is_refused_without_looping() {
        let n = 100_000;
        let rows: Vec<Conversation> = (0..n)
            .map(|i| row(&format!("c{i}"), "admin", Kind::SubAgent, Some(&format!("c{}", (i + 1) % n))))
            .collect();
        assert!(matches!(instruction_scope(&spawn(rows, "c0")), Scope::Nothing(Refusal::Cycle(_))));
    }

    #[rstest::rstest]
    #[case::duplicate(vec![row("a", "admin", Kind::OwnerChat, None), row("a", "admin", Kind::OwnerChat, None)], "a")]
    #[case::root_with_parent(vec![row("a", "admin", Kind::OwnerChat, Some("b")), row("b", "admin", Kind::OwnerChat, None)], "a")]
    #[case::unknown_account(vec![row("a", "nobody", Kind::OwnerChat, None)], "a")]
    #[case::spawned_missing(vec![row("a", "admin", Kind::OwnerChat, None)], "z")]
    #[case::cron_mid_chain(vec![row("x", "admin", Kind::SubAgent, Some("brain-ch-cron-1")), row("brain-ch-cron-1", "admin", Kind::SubAgent, Some("o")), row("o", "admin", Kind::OwnerChat, None)], "x")]
    #[case::mismatch_other_admin(vec![row("x", "admin", Kind::SubAgent, Some("o")), row("o", "other", Kind::OwnerChat, None)], "x")]
    fn hostile_rows_get_nothing(#[case] rows: Vec<Conversation>, #[case] spawned: &str) {
        assert!(matches!(instruction_scope(&spawn(rows, spawned)), Scope::Nothing(_)));
    }

    #[test]
    fn captured_bits_neither_grant_nor_are_needed() {
        let mut room = row("r", "admin", Kind::SharedRoom, None);
        room.admin = true;
        room.owner = true;
        assert_eq!(instruction_scope(&spawn(vec![room], "r")), Scope::Nothing(Refusal::NotOwnerChat(Kind::SharedRoom)));
        assert_eq!(instruction_scope(&spawn(vec![row("o", "admin", Kind::OwnerChat, None)], "o")), full());
    }

    #[test]
    fn a_fork_places_from_its_parents_cwd_and_keeps_every_policy_up_to_it() {
        let mut owner = row("o", "admin", Kind::OwnerChat, None);
        owner.cwd = Some("/own".into());
        let mut sub = row("s", "admin", Kind::SubAgent, Some("o"));
        sub.cwd = Some("/sub".into());
        sub.policy = Some(vec!["/p1".into()]);
        let mut fork = row("f", "admin", Kind::SubAgent, Some("s"));
        fork.fork = true;
        fork.cwd = Some("/fork".into());
        fork.policy = Some(vec!["/p2".into()]);
        let got = instruction_scope(&spawn(vec![owner, sub, fork], "f"));
        assert_eq!(
            got,
            Scope::Full { cwd: Some("/sub".into()), policies: vec![vec!["/p2".into()], vec!["/p1".into()]] }
        );
    }
}
