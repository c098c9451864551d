# The arrows of DESIGN.md's layer diagram, as data: for each folder of core/, the folders it may
# include (everything below it). Used by core/CMakeLists.txt (each folder is a library linking only
# these) and by CheckLayers.cmake (an include that points upward fails the configure step).
set(ML_LAYERS tensor random telemetry store nn data backend distribute project train learn export)
set(ML_ALLOWED_tensor "")
set(ML_ALLOWED_random "")
set(ML_ALLOWED_telemetry "tensor")
set(ML_ALLOWED_store "telemetry;tensor")
set(ML_ALLOWED_nn "tensor;random")
set(ML_ALLOWED_data "tensor;random")
set(ML_ALLOWED_backend "nn;data;telemetry;tensor;random")
set(ML_ALLOWED_distribute "backend;nn;data;telemetry;tensor;random")
# project/ reads the file into the types of the layers below it (DeviceList, the all-reduce, faults).
set(ML_ALLOWED_project "distribute;backend;nn;data;telemetry;tensor;random")
set(ML_ALLOWED_train "distribute;backend;nn;data;project;store;telemetry;tensor;random")
set(ML_ALLOWED_learn "train;distribute;backend;nn;data;project;store;telemetry;tensor;random")
set(ML_ALLOWED_export "project;nn;data;store;telemetry;tensor;random")

# Fails with the file, the include and the rule when a file of core/<layer> includes a folder of
# core/ that is not below it.
function(ml_check_layers core_dir)
  foreach(_layer IN LISTS ML_LAYERS)
    file(GLOB_RECURSE _files ${core_dir}/${_layer}/*.h ${core_dir}/${_layer}/*.cpp ${core_dir}/${_layer}/*.cu)
    foreach(_f IN LISTS _files)
      file(STRINGS ${_f} _includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z]+/")
      foreach(_inc IN LISTS _includes)
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([a-z]+)/.*" "\\1" _target "${_inc}")
        if(_target STREQUAL _layer OR NOT _target IN_LIST ML_LAYERS)
          continue()
        endif()
        if(NOT _target IN_LIST ML_ALLOWED_${_layer})
          message(FATAL_ERROR "upward include: ${_f} (core/${_layer}) includes ${_target}/, which is not below "
            "${_layer} in DESIGN.md's layers (${_layer} may include: ${ML_ALLOWED_${_layer}}). "
            "Move the shared piece down, or pass a plain struct instead.")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
