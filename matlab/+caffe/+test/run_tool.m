function output = run_tool(name, varargin)
% output = caffe.test.run_tool(name, arg1, ...): runs one of Poseidon's
% tools (caffe.test.tools_dir()) and fails the test if it exits non-zero.

cmd = sprintf('"%s"', fullfile(caffe.test.tools_dir(), name));
for i = 1:numel(varargin)
  cmd = sprintf('%s "%s"', cmd, varargin{i});
end
[status, output] = system(['GLOG_minloglevel=2 ' cmd ' 2>&1']);
if status ~= 0
  error('caffe:testFailed', '%s exited with %d:\n%s', cmd, status, output);
end
end
