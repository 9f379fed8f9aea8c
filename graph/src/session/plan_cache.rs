//! A session's plans by signature, bounded: past [`PLAN_CACHE_CAPACITY`] plans, the one
//! used least recently is dropped (and made again if its signature comes back), so a
//! program that runs ever new fetch lists holds a bounded number of plans.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Plan, Signature};

/// How many plans a session keeps.
pub const PLAN_CACHE_CAPACITY: usize = 1024;

/// Plans by signature, with the tick of each one's last use.
pub(super) struct PlanCache {
    plans: HashMap<Signature, (Arc<Plan>, u64)>,
    capacity: usize,
    tick: u64,
}

impl PlanCache {
    /// An empty cache of at most `capacity` plans (at least one).
    pub(super) fn new(capacity: usize) -> Self {
        PlanCache {
            plans: HashMap::new(),
            capacity: capacity.max(1),
            tick: 0,
        }
    }

    /// The plan of `signature`, marked as used now.
    pub(super) fn get(&mut self, signature: &Signature) -> Option<Arc<Plan>> {
        self.tick += 1;
        let (plan, used) = self.plans.get_mut(signature)?;
        *used = self.tick;
        Some(plan.clone())
    }

    /// Keep `plan` for `signature`, dropping the least recently used plan when full.
    pub(super) fn insert(&mut self, signature: Signature, plan: Arc<Plan>) {
        self.tick += 1;
        if self.plans.len() >= self.capacity && !self.plans.contains_key(&signature) {
            // A linear scan, on a miss only: the plan just made cost far more.
            let oldest = self
                .plans
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.plans.remove(&oldest);
            }
        }
        self.plans.insert(signature, (plan, self.tick));
    }

    /// How many plans are kept.
    pub(super) fn len(&self) -> usize {
        self.plans.len()
    }

    /// The plans kept.
    pub(super) fn plans(&self) -> impl Iterator<Item = &Arc<Plan>> {
        self.plans.values().map(|(plan, _)| plan)
    }

    /// Drop every plan.
    pub(super) fn clear(&mut self) {
        self.plans.clear();
    }
}
