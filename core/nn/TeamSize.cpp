// The work of a step, counted from the model's layers, against the measured crossover.
#include "nn/TeamSize.h"

#include "Error.h"
#include "nn/Conv2D.h"
#include "nn/Sequential.h"
#include "nn/Summary.h"

namespace ml {

double forwardMacsPerSample(const Sequential& model) {
  const auto rows = model.summary();
  double macs = 0;
  for (size_t i = 0; i < model.layerCount(); ++i) {
    if (const auto* conv = dynamic_cast<const Conv2D*>(&model.layer(i)))
      macs += static_cast<double>(conv->macsPerSample());
    else if (rows[i].type == "Dense")
      macs += static_cast<double>(rows[i].params);
    else
      macs += static_cast<double>(numel(rows[i].outputShape));
  }
  return macs;
}

bool stepTooSmallToSplit(const Sequential& model, int64_t rows) {
  return forwardMacsPerSample(model) * static_cast<double>(rows) < kTeamCrossoverMacs;
}

TeamChoice chooseTeam(const ModelSpec& spec, int64_t rows) {
  double macs = 0;
  try {
    macs = forwardMacsPerSample(Sequential(spec)) * static_cast<double>(rows);
  } catch (const UserError&) {
    return {};
  }
  if (macs >= kTeamCrossoverMacs) return {};
  return {1, "a step of " + withThousands(static_cast<int64_t>(macs)) + " multiply-adds is too small to split across threads (" +
                 withThousands(static_cast<int64_t>(kTeamCrossoverMacs)) + " and more are): one thread"};
}

}  // namespace ml
