// Reports the NCCL library's version via ncclGetVersion when NCCL was found at build time.
#include "roformer/distributed/nccl_version.h"

#ifdef ROFORMER_HAVE_NCCL
#include <nccl.h>
#endif

namespace roformer::dist {

std::string nccl_version_text() {
#ifdef ROFORMER_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "error (ncclGetVersion failed)";
  // NCCL >= 2.9 encodes the version as major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
#else
  return "not built (no NCCL found at configure time)";
#endif
}

}  // namespace roformer::dist
