// Devices: probed once on a worker thread (the CUDA plugin may take a moment to load).
#include "DevicesView.h"

#include <QApplication>
#include <QButtonGroup>
#include <QCheckBox>
#include <QClipboard>
#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QVBoxLayout>
#include <functional>

#include "Async.h"
#include "Error.h"
#include "ProjectDocument.h"
#include "Theme.h"
#include "backend/DeviceList.h"
#include "nn/Summary.h"
#include "project/Settings.h"

namespace mlui {

static QString q(const std::string& s) { return QString::fromStdString(s); }

static QFrame* card(QWidget* parent) {
  auto* f = new QFrame(parent);
  setRole(f, "card");
  return f;
}

DevicesView::DevicesView(ProjectDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* v = scrollingPage(this, tr("Devices"),
                          tr("Each device trains a full copy of the model on its share of every batch; the "
                             "gradients are all-reduced so the copies stay identical."));
  QWidget* page = v->parentWidget();
  reason_ = new QLabel(tr("Looking for GPUs…"), page);
  reason_->setObjectName(QStringLiteral("GpuReason"));
  reason_->setWordWrap(true);
  setRole(reason_, "bannerInfo");
  v->addWidget(reason_);

  v->addWidget(sectionTitle(tr("GPUs")));
  gpuCards_ = new QWidget(page);
  gpuLayout_ = new QVBoxLayout(gpuCards_);
  gpuLayout_->setContentsMargins(0, 0, 0, 0);
  v->addWidget(gpuCards_);

  v->addWidget(sectionTitle(tr("Simulated CPU devices")));
  auto* cpu = card(page);
  auto* cg = new QGridLayout(cpu);
  cg->setContentsMargins(14, 12, 14, 12);
  auto* cpuIcon = new QLabel(cpu);
  cpuIcon->setPixmap(icon(QStringLiteral("cpu")).pixmap(40, 40));
  cg->addWidget(cpuIcon, 0, 0, 2, 1, Qt::AlignTop);
  auto* cpuTitle = new QLabel(tr("<b>CPU replicas</b> — one thread per device, a real all-reduce over host memory"), cpu);
  cg->addWidget(cpuTitle, 0, 1, 1, 2);
  cg->addWidget(new QLabel(tr("Devices"), cpu), 1, 1);
  cpuCount_ = new QSpinBox(cpu);
  cpuCount_->setObjectName(QStringLiteral("CpuDeviceCount"));
  cpuCount_->setRange(1, ml::kMaxReplicas);
  cpuCount_->setAccessibleName(tr("Number of simulated CPU devices"));
  cg->addWidget(cpuCount_, 1, 2, Qt::AlignLeft);
  cpuInfo_ = new QLabel(cpu);
  setRole(cpuInfo_, "caption");
  cpuInfo_->setWordWrap(true);
  cg->addWidget(cpuInfo_, 2, 1, 1, 2);
  chips_ = new QLabel(cpu);
  chips_->setTextFormat(Qt::RichText);
  chips_->setWordWrap(true);
  cg->addWidget(chips_, 3, 1, 1, 2);
  cg->setColumnStretch(2, 1);
  v->addWidget(cpu);
  connect(cpuCount_, &QSpinBox::valueChanged, this, [this] {
    if (!refreshing_) writeDevices();
  });

  v->addWidget(sectionTitle(tr("All-reduce")));
  auto* ar = card(page);
  auto* av = new QVBoxLayout(ar);
  av->setContentsMargins(14, 10, 14, 10);
  algo_ = new QButtonGroup(this);
  const struct {
    const char* name;
    QString text;
  } algos[] = {{"ring", tr("Ring — each device sends and receives 2·(N−1)/N of the gradients; scales with N")},
               {"reduce-to-one", tr("Reduce to one, then broadcast — simple; device 0 does all the summing")},
               {"nccl", tr("NCCL — GPUs only")}};
  for (const auto& a : algos) {
    auto* b = new QRadioButton(a.text, ar);
    b->setObjectName(QStringLiteral("algo_") + QString::fromLatin1(a.name));
    b->setProperty("algo", QString::fromLatin1(a.name));
    algo_->addButton(b);
    av->addWidget(b);
  }
  connect(algo_, &QButtonGroup::buttonClicked, this,
          [this](QAbstractButton* b) { writeAllReduce(b->property("algo").toString()); });
  auto* bucketRow = new QHBoxLayout;
  bucketRow->addWidget(new QLabel(tr("Gradient bucket"), ar));
  bucket_ = new QSpinBox(ar);
  bucket_->setRange(4, 1 << 20);
  bucket_->setSuffix(tr(" KiB"));
  bucket_->setToolTip(tr("The all-reduce starts on a bucket as soon as backward has produced it"));
  bucketRow->addWidget(bucket_);
  bucketRow->addStretch(1);
  av->addLayout(bucketRow);
  connect(bucket_, &QSpinBox::valueChanged, this, [this](int kib) {
    if (refreshing_) return;
    ml::Project p = doc_->project();
    p.distribute.bucketBytes = static_cast<int64_t>(kib) * 1024;
    doc_->edit(tr("Change bucket size"), p, QStringLiteral("bucket"));
  });
  // A project setting as a check box: toggling it edits the project, one undo step named by `apply`.
  auto settingBox = [&](const QString& text, const QString& name, const QString& tip,
                        std::function<QString(ml::Project&, bool)> apply) {
    auto* box = new QCheckBox(text, ar);
    box->setObjectName(name);
    box->setToolTip(tip);
    av->addWidget(box);
    connect(box, &QCheckBox::toggled, this, [this, apply = std::move(apply)](bool on) {
      if (refreshing_) return;
      ml::Project p = doc_->project();
      const QString undo = apply(p, on);
      doc_->edit(undo, p);
    });
    return box;
  };
  shard_ = settingBox(tr("Shard the optimizer update (ZeRO stage 1)"), QStringLiteral("shardOptimizer"),
                      tr("Each replica updates only the 1/N of the parameters whose summed gradient it owns after the "
                         "reduce-scatter, keeping 1/N of the optimizer state (Adam's m and v); the updated parameters "
                         "are then all-gathered. CPU devices."),
                      [this](ml::Project& p, bool on) {
                        p.distribute.shardOptimizer = on;
                        return on ? tr("Shard the optimizer") : tr("Update the whole model on every replica");
                      });
  wireBf16_ = settingBox(
      tr("Send the gradients as bfloat16 (half the bytes; changes the results)"), QStringLiteral("allreduceBfloat16"),
      tr("Every value that crosses between replicas is rounded to bfloat16 (8 significant bits): each replica's "
         "gradient before it is sent and every partial sum, as NCCL does with a bfloat16 buffer. The all-reduce moves "
         "half the bytes, the replicas stay identical, but N replicas no longer give exactly the weights of one. "
         "CPU devices in one process, and GPUs (NCCL with bfloat16 buffers, the logical-GPU sum rounding as it adds)."),
      [this](ml::Project& p, bool on) {
        p.distribute.allreduceDtype = on ? ml::AllReduceDtype::Bfloat16 : ml::AllReduceDtype::Float32;
        return on ? tr("Send gradients as bfloat16") : tr("Send gradients as float32");
      });
  tf32_ = settingBox(tr("TF32 on GPUs (faster float32 products; changes the results)"), QStringLiteral("tf32"),
                     tr("cuBLAS and cuDNN may run the float32 products on TF32 tensor cores: inputs rounded to 10 mantissa bits, "
                        "sums in float32. TensorFlow's default on Ampere and later GPUs; off here, so that a GPU run "
                        "gives the weights of the CPU to float rounding. GPU devices."),
                     [this](ml::Project& p, bool on) {
                       p.distribute.tf32 = on;
                       return on ? tr("Use TF32 on GPUs") : tr("Use float32 on GPUs");
                     });
  v->addWidget(ar);

  // Several workers (processes, one per machine): mirrorlab-cli starts them under mpirun.
  v->addWidget(sectionTitle(tr("Workers (machines)")));
  auto* wk = card(page);
  auto* wg = new QGridLayout(wk);
  wg->setContentsMargins(14, 10, 14, 10);
  wg->addWidget(new QLabel(tr("Workers"), wk), 0, 0);
  workers_ = new QSpinBox(wk);
  workers_->setObjectName(QStringLiteral("WorkerCount"));
  workers_->setRange(1, 1024);
  workers_->setAccessibleName(tr("Number of workers (processes)"));
  workers_->setToolTip(
      tr("Each worker is a process (usually one per machine) with the devices above as its local "
         "replicas; every batch is split over all of them and the all-reduce is hierarchical: "
         "local first, then across the workers with MPI"));
  wg->addWidget(workers_, 0, 1, Qt::AlignLeft);
  copyCommand_ = new QPushButton(tr("Copy the command"), wk);
  copyCommand_->setObjectName(QStringLiteral("CopyMpirunCommand"));
  copyCommand_->setToolTip(
      tr("Copies the mpirun line that trains this project on several machines: HOSTFILE is a file you write, one line per "
         "machine (\"node1 slots=1\"); on this machine alone, Train starts the workers itself"));
  wg->addWidget(copyCommand_, 0, 2, Qt::AlignLeft);
  wg->setColumnStretch(3, 1);
  workersInfo_ = new QLabel(wk);
  workersInfo_->setObjectName(QStringLiteral("WorkersInfo"));
  setRole(workersInfo_, "caption");
  workersInfo_->setWordWrap(true);
  workersInfo_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  wg->addWidget(workersInfo_, 1, 0, 1, 4);
  v->addWidget(wk);
  connect(workers_, &QSpinBox::valueChanged, this, [this](int w) {
    if (refreshing_) return;
    ml::Project p = doc_->project();
    p.distribute.workers = w;
    doc_->edit(tr("Change workers"), p, QStringLiteral("workers"));
  });
  connect(copyCommand_, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(mpirunCommand()); });

  path_ = new QLabel(page);
  path_->setObjectName(QStringLiteral("PathLine"));
  path_->setWordWrap(true);
  setRole(path_, "planSentence");
  v->addWidget(path_);
  v->addStretch(1);

  connect(doc_, &ProjectDocument::changed, this, &DevicesView::refresh);
  refresh();
  // Probe off the UI thread (the CUDA plugin may take a moment to load).
  runAsync<ml::DeviceReport>(
      this, [] { return ml::probeDevices(); },
      [this](const Outcome<ml::DeviceReport>& r) {
        ml::DeviceReport report;
        if (r.value)
          report = *r.value;
        else
          report.noGpuReason = r.error.toStdString();
        onProbed(report);
      });
}

void DevicesView::onProbed(const ml::DeviceReport& r) {
  report_ = r;
  probed_ = true;
  qDeleteAll(gpuChecks_);
  gpuChecks_.clear();
  while (auto* item = gpuLayout_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  if (r.gpus.empty()) {
    setRole(reason_, "banner");
    reason_->setText(tr("<b>No GPU available:</b> %1. Training runs on simulated CPU devices only.")
                         .arg(q(r.noGpuReason.empty() ? "no GPU was found" : r.noGpuReason).toHtmlEscaped()));
    auto* none = new QLabel(tr("No GPUs detected on this machine."), gpuCards_);
    setRole(none, "caption");
    gpuLayout_->addWidget(none);
  } else {
    setRole(reason_, "bannerInfo");
    reason_->setText(tr("%n GPU(s) found. Tick the ones to train on; untick all to use simulated CPU devices.", "",
                        static_cast<int>(r.gpus.size())));
    for (const auto& g : r.gpus) {
      auto* c = card(gpuCards_);
      auto* h = new QHBoxLayout(c);
      h->setContentsMargins(14, 10, 14, 10);
      auto* ic = new QLabel(c);
      ic->setPixmap(icon(QStringLiteral("gpu")).pixmap(40, 40));
      h->addWidget(ic);
      auto* text = new QLabel(tr("<b>gpu:%1 · %2</b><br>%3 memory · compute capability %4.%5 · driver %6")
                                  .arg(g.index)
                                  .arg(q(g.name).toHtmlEscaped(), q(ml::formatBytes(static_cast<double>(g.memoryBytes))))
                                  .arg(g.ccMajor)
                                  .arg(g.ccMinor)
                                  .arg(q(g.driverVersion)),
                              c);
      h->addWidget(text, 1);
      auto* check = new QCheckBox(tr("Use"), c);
      check->setProperty("gpu", g.index);
      gpuChecks_ << check;
      h->addWidget(check);
      connect(check, &QCheckBox::toggled, this, [this] {
        if (!refreshing_) writeDevices();
      });
      gpuLayout_->addWidget(c);
    }
  }
  refresh();
  Q_EMIT probeFinished();
}

void DevicesView::refresh() {
  refreshing_ = true;
  const auto& d = doc_->project().distribute;
  const ml::DeviceList& list = d.devices;  // checked when the project was read or edited
  const bool gpu = list.kind == ml::DeviceKind::Gpu;
  if (!gpu) cpuCount_->setValue(list.size());
  for (QCheckBox* c : gpuChecks_) {
    bool on = false;
    for (const auto& dev : list.devices) on |= gpu && dev.physical == c->property("gpu").toInt();
    c->setChecked(on);
  }
  for (QAbstractButton* b : algo_->buttons()) {
    b->setChecked(b->property("algo").toString() == QLatin1String(ml::toString(d.allreduce)));
    if (b->property("algo").toString() == QLatin1String("nccl")) b->setEnabled(!report_.gpus.empty());
  }
  bucket_->setValue(static_cast<int>(d.bucketBytes / 1024));
  workers_->setValue(d.workers);
  const int local = list.size();
  workersInfo_->setText(
      d.workers == 1 ? tr("One worker: every replica is a thread of this program. With more, Train starts them as processes on "
                          "this machine (mirrorlab-cli under mpirun, Open MPI) and they train as one run.")
                     : tr("%1 workers × %2 local replica(s) = %3 replicas in all. Train starts the workers on this machine "
                          "(mirrorlab-cli under mpirun) and the dashboard follows the run; the all-reduce sums locally, then "
                          "across the workers with MPI. To spread them over several machines, run this command in a shell, "
                          "with a HOSTFILE naming the machines (one line each: \"node1 slots=1\"):\n%4")
                           .arg(d.workers)
                           .arg(local)
                           .arg(d.workers * local)
                           .arg(mpirunCommand()));
  shard_->setChecked(d.shardOptimizer);
  tf32_->setChecked(d.tf32);
  tf32_->setEnabled(gpu || d.tf32);              // on CPUs: only to untick it
  shard_->setEnabled(!gpu || d.shardOptimizer);  // on GPUs: only to untick it
  const bool wire = d.allreduceDtype == ml::AllReduceDtype::Bfloat16;
  wireBf16_->setChecked(wire);
  wireBf16_->setEnabled(gpu || d.workers == 1 || wire);  // CPUs across workers: only to untick it
  const int n = gpu ? 0 : cpuCount_->value();
  QStringList chips;
  for (int i = 0; i < n; ++i)
    chips << QStringLiteral("<span style='background:%1; color:white; padding:2px 6px;'>&nbsp;cpu:%2&nbsp;</span>")
                 .arg(deviceColor(i).name())
                 .arg(i);
  chips_->setText(chips.join(QStringLiteral(" ")));
  cpuInfo_->setText(tr("This machine has %n CPU core(s)", "", report_.cpuCores) +
                    (report_.cpuModel.empty() ? QString() : QStringLiteral(" (%1)").arg(q(report_.cpuModel))) +
                    tr(". More devices than cores still train correctly, but they share the cores."));
  QString why = gpu                               ? tr("on the GPUs ticked above")
                : report_.gpus.empty() && probed_ ? tr("because no GPU is available")
                                                  : tr("because no GPU is ticked");
  QString plan =
      d.workers > 1
          ? tr("Will run: %1 workers on this machine (Train starts them under mpirun), each with %2 (%3); "
               "all-reduce: hierarchical, the local replicas sum into replica 0, which sums across the workers "
               "with MPI.")
                .arg(d.workers)
                .arg(q(list.describe()), why)
          : tr("Will run: %1 (%2), all-reduce: %3.").arg(q(list.describe()), why, QLatin1String(ml::toString(d.allreduce)));
  if (d.shardOptimizer && list.size() > 1)
    plan += gpu ? tr(" The sharded optimizer update runs on CPU devices only: untick it to train on GPUs.")
                : tr(" Each replica updates 1/%1 of the parameters and keeps 1/%1 of the optimizer state, then the "
                     "parameters are all-gathered.")
                      .arg(list.size());
  if (wire && list.size() > 1)
    plan += gpu || d.workers > 1
                ? tr(" bfloat16 on the wire runs on CPU devices in one process only: untick it to train here.")
                : tr(" Gradients cross as bfloat16: half the all-reduce's bytes, and the weights differ slightly from a "
                     "float32 all-reduce's.");
  path_->setText(plan);
  refreshing_ = false;
}

QString DevicesView::mpirunCommand() const {
  const ml::Project& p = doc_->project();
  // The file's whole path (the shell may start anywhere), quoted; an unsaved project names what to do.
  const QString file =
      doc_->path().isEmpty() ? tr("SAVED-PROJECT.json") : QStringLiteral("'%1'").arg(QFileInfo(doc_->path()).absoluteFilePath());
  return QStringLiteral("mpirun -np %1 --hostfile HOSTFILE --bind-to none mirrorlab-cli train %2 --devices %3")
      .arg(std::max(1, p.distribute.workers))
      .arg(file, q(p.distribute.devices.spec));
}

void DevicesView::writeDevices() {
  ml::Project p = doc_->project();
  QStringList ids;
  for (QCheckBox* c : gpuChecks_)
    if (c->isChecked()) ids << QString::number(c->property("gpu").toInt());
  p.distribute.devices = ml::parseDevices(ids.isEmpty() ? "cpu:" + std::to_string(cpuCount_->value())
                                                        : "gpu:" + ids.join(QLatin1Char(',')).toStdString());
  if (ids.isEmpty() && p.distribute.allreduce == ml::AllReduceAlgo::Nccl) p.distribute.allreduce = ml::AllReduceAlgo::Ring;
  if (p.distribute.devices != doc_->project().distribute.devices) doc_->edit(tr("Change devices"), p, QStringLiteral("devices"));
}

void DevicesView::writeAllReduce(const QString& name) {
  ml::Project p = doc_->project();
  p.distribute.allreduce = ml::allReduceSetting(name.toStdString(), "Devices screen");
  if (p.distribute.allreduce != doc_->project().distribute.allreduce) doc_->edit(tr("Change all-reduce"), p);
}

}  // namespace mlui
