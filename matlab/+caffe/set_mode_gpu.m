function set_mode_gpu()
% caffe.set_mode_gpu(): compute on the GPU chosen by caffe.set_device
% (device 0 by default). An error on a build without CUDA or a machine
% without a GPU.

caffe.caffe_('set_mode_gpu');
end
