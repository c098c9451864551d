// Generates the inspector form from layerKinds() defaults: the value type decides the editor.
#include "LayerInspector.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "Theme.h"
#include "nn/LayerFactory.h"

namespace mlui {

QStringList activationNames() {
  return {QStringLiteral("linear"), QStringLiteral("relu"), QStringLiteral("sigmoid"), QStringLiteral("tanh"),
          QStringLiteral("softmax")};
}

static QStringList initializerNames() {
  return {QStringLiteral("glorot_uniform"), QStringLiteral("glorot_normal"), QStringLiteral("he_uniform"),
          QStringLiteral("he_normal"),      QStringLiteral("random_normal"), QStringLiteral("random_uniform"),
          QStringLiteral("zeros"),          QStringLiteral("ones")};
}

static const ml::LayerKind* kindOf(const std::string& type) {
  for (const auto& k : ml::layerKinds())
    if (k.type == type) return &k;
  return nullptr;
}

nlohmann::json initialArgs(const std::string& type) {
  nlohmann::json args = nlohmann::json::object();
  if (const auto* k = kindOf(type))
    for (auto it = k->defaults.begin(); it != k->defaults.end(); ++it)
      if (it.key().find("initializer") == std::string::npos && it.key() != "use_bias" && !it.value().is_null())
        args[it.key()] = it.value();
  return args;
}

LayerInspector::LayerInspector(QWidget* parent) : QWidget(parent) {
  // The properties scroll inside the Model screen's upper pane: a layer with many of them
  // (BatchNormalization and its explanation of synchronized statistics) was cut off at its foot.
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setObjectName(QStringLiteral("InspectorScroll"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  outer->addWidget(scroll);
  auto* content = new QWidget(scroll);
  scroll->setWidget(content);
  auto* v = new QVBoxLayout(content);
  v->setContentsMargins(0, 0, 4, 0);
  title_ = sectionTitle(tr("Layer properties"), content);
  help_ = pageHint(QString(), content);
  error_ = new QLabel(content);
  error_->setObjectName(QStringLiteral("LayerError"));
  error_->setWordWrap(true);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  setRole(error_, "error");
  error_->hide();
  formHost_ = new QWidget(content);
  v->addWidget(title_);
  v->addWidget(help_);
  v->addWidget(formHost_);
  v->addWidget(error_);
  v->addStretch(1);
  rebuild();
}

nlohmann::json LayerInspector::valueOf(const std::string& key) const {
  if (layer_.args.contains(key)) return layer_.args.at(key);
  if (layer_.type == "Dense" && key == "activation") return "linear";  // Dense without activation is linear
  if (const auto* k = kindOf(layer_.type))
    if (k->defaults.contains(key)) return k->defaults.at(key);
  return nullptr;
}

void LayerInspector::setLayer(int index, const ml::LayerSpec& layer, const QString& shownName, const QString& error) {
  const bool sameShape = index == index_ && layer.type == layer_.type && form_;
  index_ = index;
  layer_ = layer;
  shownName_ = shownName;
  error_->setText(error);
  error_->setVisible(!error.isEmpty());
  if (!sameShape) {
    rebuild();
    return;
  }
  // Same layer: refresh values in place (undo/redo), without stealing focus.
  for (auto it = editors_.begin(); it != editors_.end(); ++it) {
    const auto v = valueOf(it.key().toStdString());
    QSignalBlocker block(it.value());
    if (auto* s = qobject_cast<QSpinBox*>(it.value()); s && v.is_number())
      s->setValue(v.get<int>());
    else if (auto* d = qobject_cast<QDoubleSpinBox*>(it.value()); d && v.is_number())
      d->setValue(v.get<double>());
    else if (auto* c = qobject_cast<QCheckBox*>(it.value()); c && v.is_boolean())
      c->setChecked(v.get<bool>());
    else if (auto* cb = qobject_cast<QComboBox*>(it.value()); cb && v.is_string())
      cb->setCurrentText(QString::fromStdString(v.get<std::string>()));
    else if (auto* e = qobject_cast<QLineEdit*>(it.value()); e && !e->hasFocus() && (v.is_array() || v.is_number()))
      e->setText(v.is_number() ? QString::number(v.get<int64_t>())
                               : QString::fromStdString(v.dump())
                                     .remove(QLatin1Char('['))
                                     .remove(QLatin1Char(']'))
                                     .replace(QLatin1Char(','), QStringLiteral(", ")));
  }
  if (name_ && !name_->hasFocus()) {
    QSignalBlocker block(name_);
    name_->setText(QString::fromStdString(layer_.name));
    name_->setPlaceholderText(shownName_);
  }
}

void LayerInspector::setArg(const QString& key, const nlohmann::json& value) {
  layer_.args[key.toStdString()] = value;
  Q_EMIT layerEdited(index_, layer_, QStringLiteral("layer%1.%2").arg(index_).arg(key));
}

void LayerInspector::rebuild() {
  delete formHost_->layout();
  // deleteLater: the rebuild may run inside a signal of one of these editors.
  for (QWidget* w : formHost_->findChildren<QWidget*>(QString(), Qt::FindDirectChildrenOnly)) {
    w->hide();
    w->setObjectName(QString());
    w->deleteLater();
  }
  editors_.clear();
  name_ = nullptr;
  form_ = new QFormLayout(formHost_);
  form_->setContentsMargins(0, 6, 0, 0);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  const auto* kind = kindOf(layer_.type);
  if (index_ < 0 || !kind) {
    title_->setText(tr("Layer properties"));
    help_->setText(tr("Select a layer in the stack to edit it. Add layers from the palette by double-click or drag."));
    return;
  }
  title_->setText(tr("Layer %1 · %2").arg(index_ + 1).arg(QString::fromStdString(layer_.type)));
  help_->setText(QString::fromStdString(kind->help));

  name_ = new QLineEdit(QString::fromStdString(layer_.name), formHost_);
  name_->setPlaceholderText(shownName_);
  name_->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[A-Za-z0-9_\\-]*")), name_));
  name_->setToolTip(tr("Leave empty for an automatic name"));
  connect(name_, &QLineEdit::editingFinished, this, [this] {
    if (QString::fromStdString(layer_.name) == name_->text()) return;
    layer_.name = name_->text().toStdString();
    Q_EMIT layerEdited(index_, layer_, QStringLiteral("layer%1.name").arg(index_));
  });
  form_->addRow(tr("Name"), name_);

  // The arguments people change most come first; the JSON object itself is sorted by name.
  static const std::vector<std::string> order = {"units",        "filters",  "kernel_size",        "pool_size",
                                                 "strides",      "padding",  "activation",         "rate",
                                                 "synchronized", "use_bias", "kernel_initializer", "bias_initializer"};
  std::vector<nlohmann::json::const_iterator> args;
  for (auto it = kind->defaults.begin(); it != kind->defaults.end(); ++it) args.push_back(it);
  std::stable_sort(args.begin(), args.end(), [](const auto& a, const auto& b) {
    auto rank = [](const std::string& k) { return std::find(order.begin(), order.end(), k) - order.begin(); };
    return rank(a.key()) < rank(b.key());
  });
  for (const auto& it : args) {
    const QString key = QString::fromStdString(it.key());
    const auto v = valueOf(it.key());
    QString label = key;
    label.replace(QLatin1Char('_'), QLatin1Char(' '));
    label[0] = label[0].toUpper();
    QWidget* editor = nullptr;
    const bool window = key == QLatin1String("kernel_size") || key == QLatin1String("pool_size") ||
                        key == QLatin1String("strides") || key == QLatin1String("target_shape");
    if (window) {
      editor = windowEditor(key, v);
    } else if (key == QLatin1String("activation") || key == QLatin1String("padding") ||
               key.endsWith(QLatin1String("initializer"))) {
      auto* c = new QComboBox(formHost_);
      c->addItems(key == QLatin1String("activation") ? activationNames()
                  : key == QLatin1String("padding")  ? QStringList{QStringLiteral("valid"), QStringLiteral("same")}
                                                     : initializerNames());
      c->setCurrentText(QString::fromStdString(v.is_string() ? v.get<std::string>() : std::string()));
      connect(c, &QComboBox::currentTextChanged, this, [this, key](const QString& t) { setArg(key, t.toStdString()); });
      editor = c;
    } else if (it.value().is_boolean()) {
      auto* c = new QCheckBox(formHost_);
      c->setChecked(v.is_boolean() && v.get<bool>());
      connect(c, &QCheckBox::toggled, this, [this, key](bool on) { setArg(key, on); });
      editor = c;
    } else if (it.value().is_number_integer()) {
      auto* s = new QSpinBox(formHost_);
      s->setRange(1, 1 << 24);
      s->setGroupSeparatorShown(true);
      s->setValue(v.is_number() ? v.get<int>() : 1);
      connect(s, &QSpinBox::valueChanged, this, [this, key](int x) { setArg(key, x); });
      editor = s;
    } else if (it.value().is_number()) {
      auto* d = new QDoubleSpinBox(formHost_);
      d->setDecimals(key == QLatin1String("epsilon") ? 5 : 3);
      d->setSingleStep(key == QLatin1String("epsilon") ? 0.0001 : 0.01);
      d->setRange(0.0, key == QLatin1String("rate") ? 0.999 : 1e6);
      d->setValue(v.is_number() ? v.get<double>() : 0.0);
      connect(d, &QDoubleSpinBox::valueChanged, this, [this, key](double x) { setArg(key, x); });
      editor = d;
    } else {
      auto* e = new QLineEdit(QString::fromStdString(v.is_string() ? v.get<std::string>() : v.dump()), formHost_);
      connect(e, &QLineEdit::editingFinished, this, [this, key, e] { setArg(key, e->text().toStdString()); });
      editor = e;
    }
    editor->setObjectName(QStringLiteral("arg_") + key);
    editors_.insert(key, editor);
    form_->addRow(label, editor);
    if (key == QLatin1String("synchronized")) {
      auto* hint =
          pageHint(tr("Off (TensorFlow's default): each device normalises with the mean and variance of its own share of "
                      "the batch, so results change with the number of devices; on: the statistics are summed across "
                      "devices every step, so N devices train exactly like one."),
                   formHost_);
      hint->setObjectName(QStringLiteral("BatchNormStatisticsHint"));
      hint->setWordWrap(true);
      form_->addRow(QString(), hint);
    }
  }
}

// kernel_size, pool_size, strides: "3" or "2, 3" (Keras' int or pair); target_shape: "28, 28, 1".
// Empty strides of a pooling layer: the pool size (Keras' None).
QWidget* LayerInspector::windowEditor(const QString& key, const nlohmann::json& v) {
  QString text;
  if (v.is_array())
    for (const auto& d : v) text += (text.isEmpty() ? QString() : QStringLiteral(", ")) + QString::number(d.get<int64_t>());
  else if (v.is_number())
    text = QString::number(v.get<int64_t>());
  auto* e = new QLineEdit(text, formHost_);
  e->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral("[0-9 ,\\-]*")), e));
  if (key == QLatin1String("strides") && layer_.type != "Conv2D") e->setPlaceholderText(tr("= pool size"));
  connect(e, &QLineEdit::editingFinished, this, [this, key, e] {
    nlohmann::json value = nlohmann::json::array();
    for (const QString& part : e->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
      value.push_back(part.trimmed().toLongLong());
    if (value.empty()) {
      if (!layer_.args.contains(key.toStdString())) return;
      layer_.args.erase(key.toStdString());
      Q_EMIT layerEdited(index_, layer_, QStringLiteral("layer%1.%2").arg(index_).arg(key));
      return;
    }
    if (value.size() == 1 && key != QLatin1String("target_shape")) value = value[0];
    if (layer_.args.contains(key.toStdString()) && layer_.args.at(key.toStdString()) == value) return;
    setArg(key, value);
  });
  return e;
}

}  // namespace mlui
