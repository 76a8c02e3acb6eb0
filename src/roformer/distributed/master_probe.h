// Fast checks of the rendezvous address before the TCP store waits on it: MASTER_ADDR must
// resolve, and (for ranks that connect to it) the host must answer within seconds, so a typo
// or a dead node fails in seconds with one line, not after dist.timeout_s under c10d traces.
#pragma once

#include <chrono>

#include "roformer/distributed/dist_env.h"

namespace roformer::dist {

// Throws UserError naming MASTER_ADDR/MASTER_PORT when the address does not resolve or, for a
// connecting rank, when the host does not answer a TCP connect within `answer_within` (a refused
// connection is an answer: rank 0 may not have opened the store yet).
void probe_master(const DistEnv& env, std::chrono::milliseconds answer_within);

}  // namespace roformer::dist
