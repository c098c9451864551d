// Paints one row per parameterised layer: a tile per device with the same weight pattern in each,
// so a learner sees N full copies of the model.
#include "MirroredCopiesWidget.h"

#include <algorithm>

#include <QPainter>
#include <QPainterPath>

#include <cmath>

#include "Theme.h"
#include "nn/Summary.h"

namespace mlui {

namespace {
constexpr int kRowH = 46, kTile = 34, kGap = 8, kLabelW = 170, kTop = 34;

// A deterministic "weights" pattern: the same seed gives the same picture on every copy.
void paintWeights(QPainter& p, const QRectF& r, uint32_t seed) {
  constexpr int cells = 6;
  const double cw = r.width() / cells, ch = r.height() / cells;
  uint32_t s = seed * 2654435761u + 1;
  for (int y = 0; y < cells; ++y)
    for (int x = 0; x < cells; ++x) {
      s ^= s << 13;
      s ^= s >> 17;
      s ^= s << 5;
      const double v = (s % 1000) / 1000.0 * 2 - 1;  // -1..1
      const QColor c = v >= 0 ? QColor::fromRgbF(0.93 - 0.55 * v, 0.95 - 0.35 * v, 1.0)
                              : QColor::fromRgbF(1.0, 0.95 + 0.35 * v, 0.93 + 0.55 * v);
      p.fillRect(QRectF(r.x() + x * cw, r.y() + y * ch, cw + 0.5, ch + 0.5), c);
    }
}
}  // namespace

MirroredCopiesWidget::MirroredCopiesWidget(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  setAccessibleName(tr("Mirrored copies of the model"));
}

void MirroredCopiesWidget::setAnalysis(const ModelAnalysis& a) {
  a_ = a;
  updateGeometry();
  update();
}

int MirroredCopiesWidget::tileCount() const {
  int layers = 0;
  for (const auto& r : a_.rows) layers += r.params > 0 ? 1 : 0;
  return layers * a_.replicas;
}

QSize MirroredCopiesWidget::sizeHint() const {
  int layers = 0;
  for (const auto& r : a_.rows) layers += r.params > 0 ? 1 : 0;
  return {kLabelW + a_.replicas * (kTile + kGap) + 20, kTop + std::max(1, layers) * kRowH + 70};
}

void MirroredCopiesWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), Qt::white);
  QFont f = font();
  QFont bold = f;
  bold.setBold(true);
  const QColor text(0x2c, 0x3a, 0x4a), muted(0x6b, 0x7a, 0x8c);
  const int n = std::max(1, a_.replicas);
  // Device headers, in the device colours used by every chart.
  p.setFont(f);
  // A narrow pane gives the names less room (elided) before it shows fewer copies: two copies at
  // least where they fit, so the copies are still seen to be copies.
  const int labelW = std::clamp(width() - std::min(n, 2) * (kTile + kGap) - 10, 90, kLabelW);
  const int tiles = std::min(n, std::max(1, (width() - labelW - 10) / (kTile + kGap)));
  for (int d = 0; d < tiles; ++d) {
    const QRect hr(labelW + d * (kTile + kGap) - 6, 8, kTile + 12, 18);
    p.setPen(deviceColor(d).darker(115));
    const QString label = d < static_cast<int>(a_.deviceLabels.size()) ? QString::fromStdString(a_.deviceLabels[d])
                                                                       : QStringLiteral("dev %1").arg(d);
    p.drawText(hr, Qt::AlignCenter, label);
  }
  if (tiles < n) {
    p.setPen(muted);
    p.drawText(QRect(labelW + tiles * (kTile + kGap), 8, 80, 18), Qt::AlignVCenter, QStringLiteral("+%1 more").arg(n - tiles));
  }
  int y = kTop, layers = 0;
  for (size_t i = 0; i < a_.rows.size(); ++i) {
    const auto& r = a_.rows[i];
    if (r.params <= 0) continue;
    ++layers;
    p.setPen(text);
    p.setFont(bold);
    p.drawText(QRect(8, y + 2, labelW - 14, 18), Qt::AlignLeft | Qt::AlignVCenter,
               QFontMetrics(bold).elidedText(QString::fromStdString(r.name), Qt::ElideMiddle, labelW - 14));
    p.setFont(f);
    p.setPen(muted);
    p.drawText(QRect(8, y + 19, labelW - 14, 16), Qt::AlignLeft | Qt::AlignVCenter,
               tr("%1 params").arg(QString::fromStdString(ml::withThousands(r.params))));
    const uint32_t seed = static_cast<uint32_t>(qHash(QString::fromStdString(r.name)) ^ static_cast<uint32_t>(r.params));
    for (int d = 0; d < tiles; ++d) {
      const QRectF tile(labelW + d * (kTile + kGap), y + 2, kTile, kTile);
      QPainterPath clip;
      clip.addRoundedRect(tile, 4, 4);
      p.save();
      p.setClipPath(clip);
      paintWeights(p, tile, seed);
      p.restore();
      p.setPen(QPen(deviceColor(d), 2.5));
      p.setBrush(Qt::NoBrush);
      p.drawRoundedRect(tile.adjusted(1, 1, -1, -1), 4, 4);
    }
    y += kRowH;
  }
  p.setPen(muted);
  const QRect foot(8, y + 4, width() - 16, 64);
  if (!layers) {
    p.drawText(foot, Qt::AlignLeft | Qt::TextWordWrap,
               a_.ok ? tr("No layer has weights yet.") : tr("The copies appear once every layer fits."));
    return;
  }
  p.drawText(foot, Qt::AlignLeft | Qt::TextWordWrap,
             tr("Every device holds a full, identical copy: %1 × %2 parameters. Each batch is split across the "
                "copies; the gradients are averaged so the copies stay equal.")
                 .arg(n)
                 .arg(QString::fromStdString(ml::withThousands(a_.totalParams))));
}

}  // namespace mlui
