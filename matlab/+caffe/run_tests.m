function results = run_tests(pattern)
% results = caffe.run_tests()
% results = caffe.run_tests(pattern)
%   Runs matcaffe's tests (+caffe/+test/test_*.m; with `pattern`, those
%   whose name contains it) in CPU mode, each after caffe.reset_all(), and
%   prints one line per test. Returns a struct array with fields Name,
%   Passed, Failed, Duration (seconds) and Details (the error, when
%   failed). From a shell:
%     octave-cli --eval "addpath('build/matlab'); ...
%                        r = caffe.run_tests(); exit(any([r.Failed]))"
%   The tests that train read Fashion-MNIST (/usr/share/datasets) and run
%   build/tools/convert_mnist_data ($POSEIDON_TOOLS overrides the folder).

if nargin < 1
  pattern = '';
end
test_dir = fullfile(fileparts(mfilename('fullpath')), '+test');
files = dir(fullfile(test_dir, 'test_*.m'));
names = sort(cellfun(@(f) f(1:end-2), {files.name}, 'UniformOutput', false));
if ~isempty(pattern)
  names = names(cellfun(@(n) ~isempty(strfind(n, pattern)), names));
end

caffe.set_mode_cpu();
results = struct('Name', {}, 'Passed', {}, 'Failed', {}, 'Duration', {}, ...
                 'Details', {});
for i = 1:numel(names)
  cleared = caffe.reset_all();  %#ok<NASGU> quiet
  fprintf('[ RUN      ] %s\n', names{i});
  started = tic;
  details = '';
  try
    feval(['caffe.test.' names{i}]);
    passed = true;
  catch err
    passed = false;
    details = sprintf('%s: %s', err.identifier, err.message);
    for s = 1:numel(err.stack)
      details = sprintf('%s\n    at %s line %d', details, err.stack(s).name, ...
                        err.stack(s).line);
    end
  end
  elapsed = toc(started);
  if passed
    fprintf('[       OK ] %s (%.2f s)\n', names{i}, elapsed);
  else
    fprintf('[  FAILED  ] %s (%.2f s)\n  %s\n', names{i}, elapsed, details);
  end
  results(end + 1) = struct('Name', names{i}, 'Passed', passed, ...
                            'Failed', ~passed, 'Duration', elapsed, ...
                            'Details', details);
end
cleared = caffe.reset_all();  %#ok<NASGU> quiet
fprintf('%d tests: %d passed, %d failed\n', numel(results), ...
        sum([results.Passed]), sum([results.Failed]));
end
