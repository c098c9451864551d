// The window geometry check shared by Conv2D and the pooling layers.
#include "nn/Spatial.h"

#include "Error.h"
#include "Field.h"

namespace ml {

Geometry spatialGeometry(const std::string& layer, const std::string& type, const Shape& input, const Window& win,
                         const char* windowWord) {
  const std::string who = "layer '" + layer + "' (" + type + ")";
  if (input.size() != 3) {
    std::string fix = input.size() == 1
                          ? "it needs images (height, width, channels); flat data (CSV, or after Flatten/Dense) has none: "
                            "use Dense layers, or a Reshape to [height, width, channels] before it"
                          : "set " + fieldInWords("model.input_shape") +
                                " to [height, width, channels], e.g. [28, 28, 1], or add a Reshape before it";
    if (input.size() == 2)
      fix = "a grey image needs a channels axis: set " + fieldInWords("model.input_shape") + " to [" + std::to_string(input[0]) +
            ", " + std::to_string(input[1]) + ", 1], or add Reshape [" + std::to_string(input[0]) + ", " +
            std::to_string(input[1]) + ", 1] before it";
    throw UserError(who + " expects input of shape (height, width, channels) but gets " + shapeToString(input) + ": " + fix,
                    input.size() == 1 ? "" : "model.input_shape");
  }
  Geometry g;
  g.h = input[0];
  g.w = input[1];
  g.c = input[2];
  g.oh = outSize(g.h, win.kh, win.sh, win.same);
  g.ow = outSize(g.w, win.kw, win.sw, win.same);
  if (g.oh <= 0 || g.ow <= 0)
    throw UserError(who + ": its " + windowWord + " " + std::to_string(win.kh) + "x" + std::to_string(win.kw) +
                    " is larger than its input " + shapeToString(input) + " and leaves nothing: use a smaller " + windowWord +
                    ", padding \"same\", or fewer layers that shrink the image before it");
  g.padTop = padBefore(g.h, g.oh, win.kh, win.sh, win.same);
  g.padLeft = padBefore(g.w, g.ow, win.kw, win.sw, win.same);
  return g;
}

}  // namespace ml
