#include "text_table.hpp"

#include <algorithm>

namespace sluice {

std::string align_columns(const std::vector<std::vector<std::string>>& rows, size_t left_columns) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c != 0) line += "  ";
      line += c < left_columns ? row[c] + pad : pad + row[c];
    }
    // A left-aligned last column pads nothing useful.
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace sluice
