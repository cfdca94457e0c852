function solver = get_solver(solver_file)
% solver = caffe.get_solver(solver_file)
%   Builds a caffe.Solver from a solver prototxt (relative paths in it are
%   relative to the current directory, as in Caffe).

if nargin ~= 1
  error('caffe:usage', 'usage: solver = caffe.get_solver(solver_file)');
end
caffe.Net.check_string(solver_file, 'get_solver', 'solver_file');
solver = caffe.Solver(caffe.caffe_('get_solver', solver_file));
end
