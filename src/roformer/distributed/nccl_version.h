// NCCL presence and version, for `roformer version` and the multi-GPU communicator.
#pragma once

#include <string>

namespace roformer::dist {

// "2.28.9" from the NCCL library loaded at run time, or "not built" / an error text.
std::string nccl_version_text();

}  // namespace roformer::dist
