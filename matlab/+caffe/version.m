function version_str = version()
% caffe.version(): the version of the Poseidon core behind this package.

version_str = caffe.caffe_('version');
end
