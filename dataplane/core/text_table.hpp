// Rows of cells as aligned text columns, two spaces apart: the first `left_columns` columns
// left-aligned (names), the rest right-aligned (numbers). For the counters table and
// sluicectl's listings.
#pragma once

#include <string>
#include <vector>

namespace sluice {

std::string align_columns(const std::vector<std::vector<std::string>>& rows,
                          size_t left_columns = 1);

}  // namespace sluice
