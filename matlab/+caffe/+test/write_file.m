function file = write_file(lines, dir_name)
% file = caffe.test.write_file(lines [, dir_name])
%   Writes a cell of lines (or one string) to a new temporary file (in
%   dir_name when given) and returns its name.

if ischar(lines)
  lines = {lines};
end
if nargin < 2
  file = tempname();
else
  file = tempname(dir_name);
end
fid = fopen(file, 'w');
if fid < 0
  error('caffe:testFailed', 'cannot write %s', file);
end
fprintf(fid, '%s\n', lines{:});
fclose(fid);
end
