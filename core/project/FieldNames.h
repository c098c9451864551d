// A project file's fields in the words of the studio's screens: messages name the screen and the
// field a user sees ("Training screen › Batch size"), then the key for people editing the file by
// hand ("(batch_size in the file's training section)"), never a bare dotted JSON path.
#pragma once
#include <string>

namespace ml {

// path: a JSON path as the reader walks it ("training.batch_size", "model.layers[2].units",
// "training.optimizer.epsilon", "" for the top level). Unknown paths still get the section and key
// in words.
std::string fieldInWords(const std::string& path);

}  // namespace ml
