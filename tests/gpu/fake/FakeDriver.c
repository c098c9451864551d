int mirrorlab_fake_cuda_driver(void) { return 0; }  /* an empty libcuda.so.1 for DeviceProbe to find */
