function init_log(level)
% caffe.init_log(level): sends the core's log (glog) to stderr from `level`
% up: 0 INFO (the default), 1 WARNING, 2 ERROR. The environment variable
% GLOG_minloglevel sets the same before Octave starts.

if nargin < 1
  level = 0;
end
caffe.caffe_('init_log', level);
end
